"""finalize() is optional; signals keep the trace; threads; the reference's native module."""

import signal

LOOP = """
import os, signal, sys, time
# As in a terminal: a harness started as a background job (`cmd &` in a script) hands its
# children SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
from dftracer.python import dftracer, dft_fn
dftracer.initialize_log()
df = dft_fn("X")
@df.log
def f(i): return i
for i in range(100): f(i)
open(os.environ["OUT"] + "/ready", "w").close()
if len(sys.argv) > 1:
    os.kill(os.getpid(), getattr(signal := __import__("signal"), "SIG" + sys.argv[1]))
time.sleep(1)
"""


def test_no_finalize_still_complete(run):
    r = run(LOOP.replace("time.sleep(1)", ""), env={"DFTRACER_FLUSH_INTERVAL_MS": "60000"})
    assert len(r.events("f")) == 100
    assert [x for x in r.records() if x["name"] == "end"][0]["args"]["num_events"] == 101


def test_sigterm_completes_trace_and_dies_by_signal(run):
    r = run(LOOP, args=["TERM"], check=False, env={"DFTRACER_FLUSH_INTERVAL_MS": "60000"})
    assert r.returncode == -signal.SIGTERM
    assert len(r.events("f")) == 100
    assert any(x["name"] == "end" for x in r.records())


def test_ctrl_c_still_raises_keyboard_interrupt(run):
    r = run(LOOP, args=["INT"], check=False, env={"DFTRACER_FLUSH_INTERVAL_MS": "60000"})
    assert "KeyboardInterrupt" in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert len(r.events("f")) == 100
    assert any(x["name"] == "end" for x in r.records())


def test_threads_each_their_tid_and_exact_count(run):
    r = run(
        """
        import threading
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("T")
        @df.log
        def work(i): return i
        def loop():
            for i in range(100_000): work(i)
        ts = [threading.Thread(target=loop) for _ in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        log.finalize()
        """,
        env={"DFTRACER_INC_METADATA": "0"},
        timeout=300,
    )
    ev = r.events("work")
    assert len(ev) == 800_000
    tids = {}
    for e in ev:
        tids[e["tid"]] = tids.get(e["tid"], 0) + 1
    assert len(tids) == 8 and set(tids.values()) == {100_000}


def test_unwritable_log_dir_is_one_clear_line(run):
    r = run(
        """
        import dftracer.dftracer as d
        d.initialize("/proc/nonexistent-dir/t")
        d.log_event("e", "C", 1, 1)
        print("still running")
        """,
        enable=True,
    )
    assert "still running" in r.stdout
    lines = [l for l in r.stderr.splitlines() if "DFTRACER" in l]
    assert len(lines) == 1 and "/proc/nonexistent-dir" in lines[0], r.stderr


def test_exec_finishes_the_trace_first(run):
    r = run(
        """
        import os
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/run.pfw", None, -1)
        t = d.get_time()
        for i in range(100):
            d.log_event("before_exec", "c", t + i, 1)
        os.execv("/bin/true", ["true"])
        """
    )
    (events,) = r.traces().values()
    assert len([e for e in events if e.get("name") == "before_exec"]) == 100
    assert events[-1]["name"] == "end", "end is the last line"
