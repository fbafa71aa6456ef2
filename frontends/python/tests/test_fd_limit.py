"""A Python program that exhausts its descriptor table first thing and exits holding it keeps
its whole trace: the tracer holds one descriptor for its lazily created file from the start
(FORMAT.md "Files"), so the program sees exactly one successful open fewer than untraced."""

import pytest

FILL = """
import errno, os, resource, sys
limit, traced, n = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
# `ulimit -n LIMIT` for this process, before tracing starts.
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
if traced:
    import dftracer.dftracer as d
    from dftracer.python import dft_fn

    d.initialize()
    df = dft_fn("STEP")

    @df.log
    def step(i):
        return i

held = []
while True:
    try:
        held.append(os.open(__file__, os.O_RDONLY))
    except OSError as e:
        assert e.errno == errno.EMFILE, e
        break
if traced:
    for i in range(n):
        d.log_event("event", "C", d.get_time(), 1, {"i": i})
        step(i)
print(len(held))
"""


@pytest.mark.parametrize("limit", [16, 1024])
def test_a_program_that_exhausts_its_fds_keeps_its_trace(run, limit):
    n = 300
    untraced = run(FILL, enable=False, args=[str(limit), "0", str(n)])
    assert not untraced.files()
    traced = run(FILL, args=[str(limit), "1", str(n)])
    assert "DFTRACER" not in traced.stderr, traced.stderr
    assert int(traced.stdout) + 1 == int(untraced.stdout), (traced.stdout, untraced.stdout)
    (recs,) = traced.traces().values()
    end = next(r for r in recs if r["name"] == "end")
    assert end["args"]["lost"] == 0 and end["args"]["dropped"] == 0
    events = [r["args"]["i"] for r in traced.events("event")]
    assert events == list(range(n))
    assert len(traced.events("step")) == n


DOUBLE_FORK = """
import errno, os, resource, sys, time
import dftracer.dftracer as d

n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
d.initialize()
d.log_event("parent", "C", d.get_time(), 1)
time.sleep(0.4)  # the parent's file exists: the children inherit its descriptor
pid = os.fork()
if pid == 0:
    # A daemonizer's double fork: the middle process forks before anything else.
    g = os.fork()
    if g == 0:
        held = []
        while True:
            try:
                held.append(os.open(__file__, os.O_RDONLY))
            except OSError as e:
                assert e.errno == errno.EMFILE, e
                break
        for i in range(n):
            d.log_event("event", "C", d.get_time(), 1, {"i": i})
        print(len(held), flush=True)
        os._exit(0)
    _, st = os.waitpid(g, 0)
    os._exit(os.waitstatus_to_exitcode(st))
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
"""


def test_the_grandchild_of_a_double_fork_that_exhausts_its_fds_keeps_its_trace(run):
    n = 200
    r = run(DOUBLE_FORK, args=[str(n)], env={"DFTRACER_FLUSH_INTERVAL_MS": "100"})
    assert "DFTRACER" not in r.stderr, r.stderr
    assert int(r.stdout) > 0
    grandchild = [recs for recs in r.traces().values() if any(x["name"] == "event" for x in recs)]
    assert len(grandchild) == 1, list(r.traces())
    (recs,) = grandchild
    end = next(x for x in recs if x["name"] == "end")
    assert end["args"]["lost"] == 0
    assert [x["args"]["i"] for x in recs if x["name"] == "event"] == list(range(n))


THREADED_INIT = """
import os, sys, threading
import dftracer.dftracer as d

def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))

def reserve():
    for n in os.listdir("/proc/self/fd"):
        try:
            if "dftracer-reserve" in os.readlink(f"/proc/self/fd/{n}"):
                return int(n)
        except OSError:
            pass
    return -1

threads = int(sys.argv[1])
go = threading.Event()
pool = [threading.Thread(target=go.wait) for _ in range(threads)]
for t in pool:
    t.start()
before = status("FDSize")
d.initialize()
print(before, status("FDSize"), reserve(), status("Threads"))
for i in range(50):
    d.log_event("event", "C", d.get_time(), 1, {"i": i})
go.set()
for t in pool:
    t.join()
d.finalize()
"""


def test_init_with_threads_running_keeps_the_descriptor_table(run):
    # A process whose threads share the table (numpy's BLAS pool, a C++ thread pool): growing
    # it waits for an RCU grace period, and every thread's open with it (sys::high_fd_floor).
    # The reserve takes the top of the table the kernel has; single-threaded, far above.
    r = run(THREADED_INIT, args=["3"])
    before, after, fd, threads = map(int, r.stdout.split())
    assert threads == 4, r.stdout
    assert after == before, f"descriptor table grew from {before} to {after} at init"
    assert 3 <= fd < before, (fd, before)
    assert [e["args"]["i"] for e in r.events("event")] == list(range(50))
    one = run(THREADED_INIT, args=["0"])
    before, after, fd, _ = map(int, one.stdout.split())
    assert fd >= 960 and after > fd, one.stdout
    assert len(one.events("event")) == 100  # both runs' files, in the one output dir
