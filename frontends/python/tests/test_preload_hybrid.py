"""Python frontend and libdftracer_preload.so in one process: Python events in the -app file,
I/O events in the -preload file, no duplicates, no empty file."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"


def test_python_with_preload(run, tmp_path):
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.txt").write_text("hello\n")
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        df = dft_fn("train")
        @df.log
        def read(p):
            with open(p) as f:
                return f.read()
        dftracer.initialize_log(logfile=os.environ["OUT"] + "/run")
        for i in range(3):
            assert read(os.environ["DATA"] + "/f.txt") == "hello\\n"
        """,
        env={
            "LD_PRELOAD": str(PRELOAD),
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_DATA_DIR": str(data),
            "DATA": str(data),
        },
    )
    traces = r.traces()
    app = [t for f, t in traces.items() if f.name.endswith("-app.pfw.gz")]
    pre = [t for f, t in traces.items() if f.name.endswith("-preload.pfw.gz")]
    assert len(app) == 1 and len(pre) == 1, list(traces)
    app_ev = [e for e in app[0] if e.get("ph") == 1 and e["cat"] != "dftracer"]
    pre_ev = [e for e in pre[0] if e.get("ph") == 1 and e["cat"] != "dftracer"]
    assert [e["name"] for e in app_ev] == ["read"] * 3
    assert all(e["type"] == 3 for e in pre_ev)
    opens = [e for e in pre_ev if e["name"].startswith("open")]
    assert len(opens) == 3, [e["name"] for e in pre_ev]
    # The tracer's own trace files are never traced.
    fh = [x["args"]["name"] for x in pre[0] if x["name"] == "FH"]
    assert not any(".pfw" in n for n in fh), fh
