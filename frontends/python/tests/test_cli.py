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


def test_python_thread_names_are_in_the_trace_and_the_perfetto_view(run, tmp_path):
    r = run(
        """
        import threading
        from concurrent.futures import ThreadPoolExecutor
        from dftracer.python import dft_fn
        # Started before the first event (the tracer starts lazily at it): named all the same.
        gate = threading.Event()
        before = threading.Thread(name="before-start", target=lambda: (gate.wait(), work()))
        before.start()

        def work():
            with dft_fn("app", name="in_thread"):
                pass

        with dft_fn("app", name="main_event"):
            pass
        gate.set()
        loaders = [threading.Thread(name=f"loader-{i}", target=work) for i in range(2)]
        for t in loaders:
            t.start()
        for t in loaders + [before]:
            t.join()
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as ex:
            ex.submit(work).result()
        print({t.name: t.native_id for t in loaders + [before]})
        """
    )
    tids = eval(r.stdout.strip().splitlines()[-1])
    recs = r.records()
    named = {x["tid"]: x["args"]["name"] for x in recs if x.get("name") == "thread_name"}
    ev = {e["tid"] for e in r.events("in_thread")}
    assert len(ev) == 4, ev
    for name, tid in tids.items():
        assert named.get(tid) == name, (name, tid, named)
    (pool_tid,) = ev - set(tids.values())
    assert named[pool_tid] == "pool_0", named
    # The header's record of the main thread stays the reference's (its pid as the name).
    pid = recs[0]["pid"]
    assert named[pid] == str(pid)
    out = tmp_path / "view.json"
    p = dftracer("perfetto", str(r.out), "-o", str(out))
    assert p.returncode == 0, p.stderr
    meta = {(e["tid"]): e["args"]["name"] for e in json.load(open(out))["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert sorted(v for v in meta.values() if v.startswith(("loader", "before", "pool"))) == \
        ["before-start", "loader-0", "loader-1", "pool_0"], meta
