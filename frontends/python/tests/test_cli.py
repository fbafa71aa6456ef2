"""The `dftracer` console script the wheel installs (the Rust tool in dftracer/bin/): it runs
from the venv's bin directory on a trace this package wrote."""

import json
import os
import subprocess
import sys


def dftracer(*args):
    exe = os.path.join(os.path.dirname(sys.executable), "dftracer")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def test_console_script_runs_the_bundled_tool(run, tmp_path):
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        step = dft_fn("train")

        @step.log
        def train_step(i):
            return i * 2

        for i in range(50):
            train_step(i)
        log.finalize()
        """
    )
    v = dftracer("--version")
    assert v.returncode == 0 and v.stdout.startswith("dftracer "), v.stderr
    val = dftracer("validate", str(r.out))
    assert val.returncode == 0, val.stdout + val.stderr
    assert "1 ok, 0 failed" in val.stdout
    s = dftracer("summary", "--json", str(r.out))
    assert s.returncode == 0, s.stderr
    total = json.loads(s.stdout)["total"]
    assert total["events_by_category"]["train"] == 50
    assert total["top_functions"][0]["name"] == "train_step"
    out = tmp_path / "t.json"
    p = dftracer("perfetto", "-q", str(r.out), "-o", str(out))
    assert p.returncode == 0, p.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X" and e["name"] == "train_step") == 50
