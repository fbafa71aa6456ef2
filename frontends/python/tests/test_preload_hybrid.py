"""Python frontend and libdftracer_preload.so in one process: one core, one `-app` file with the
Python events and the I/O events, no duplicates, no empty second file."""

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
    assert len(traces) == 1, list(traces)
    (name, events), = traces.items()
    assert name.name.endswith("-app.pfw.gz"), name
    ev = [e for e in events if e.get("ph") == 1 and e["cat"] != "dftracer"]
    assert [e["name"] for e in ev if e["type"] == 6] == ["read"] * 3
    io = [e for e in ev if e["type"] == 3]
    opens = [e for e in io if e["name"].startswith("open")]
    assert len(opens) == 3, [e["name"] for e in io]
    assert len(ev) == len(io) + 3, "only Python and I/O events"
    # One start and one end: one writer wrote the file.
    assert [e["name"] for e in events if e.get("cat") == "dftracer" and e.get("ph") == 1] == ["start", "end"]
    pre = [events]
    # The tracer's own trace files are never traced.
    fh = [x["args"]["name"] for x in pre[0] if x["name"] == "FH"]
    assert not any(".pfw" in n for n in fh), fh
