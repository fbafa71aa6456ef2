"""`dftracer.python.dbg` and `dftracer.dftracer_dbg`: the same API and the same trace as
`dftracer.python` / `dftracer.dftracer`, with one `[DFTRACER DEBUG]` line on stderr per call."""

import re

PROGRAM = """
import os
from dftracer.python{dbg} import dftracer, dft_fn, ai
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
df = dft_fn("train")

@df.log
def step(epoch, step):
    return step

class Loader:
    @df.log_init
    def __init__(self, n):
        self.n = n

for i in range(3):
    step(0, i)
Loader(2)
with dft_fn("io", name="read_loop") as region:
    region.update(args={{"files": 2}})

@ai.compute.forward
def forward(x):
    return x

forward(1)
with ai.comm.all_reduce:
    pass
t = dftracer.get_instance().get_time()
dftracer.get_instance().log_event(name="custom", cat="emu", start_time=t, duration=5, int_args={{"job": (0, 7)}})
log.finalize()
"""


def summary(r):
    return sorted((e["name"], e["cat"], tuple(sorted((e.get("args") or {}).items(), key=str)))
                  for e in r.events() if e["cat"] != "dftracer")


def strip_hhash(rows):
    return [(n, c, tuple(kv for kv in a if kv[0] != "hhash")) for n, c, a in rows]


def test_dbg_writes_the_same_trace_and_logs_every_call(run):
    plain = run(PROGRAM.format(dbg=""))
    assert "[DFTRACER DEBUG]" not in plain.stderr
    dbg = run(PROGRAM.format(dbg=".dbg"))
    assert strip_hhash(summary(dbg)) == strip_hhash(summary(plain))
    lines = [l for l in dbg.stderr.splitlines() if l.startswith("[DFTRACER DEBUG]: [")]
    text = "\n".join(lines)
    # One line per call of the decorated function (its three calls), per __init__, per region
    # entry and exit, per ai tracer use, per tracer method.
    assert len(re.findall(r"\.log:step\(0, \d\) -> \d$", text, re.M)) == 3, text
    assert len(re.findall(r"Loader\.__init__\(", text)) == 1, text
    assert text.count("dft_fn('io', name='read_loop').__enter__()") == 1
    assert text.count("dft_fn('io', name='read_loop').__exit__()") == 1
    assert "dft_fn('io', name='read_loop').update(args={'files': 2})" in text
    assert re.search(r"ai\.compute\.forward:forward\(1\) -> 1$", text, re.M), text
    assert "ai.comm.all_reduce.__enter__()" in text and "ai.comm.all_reduce.__exit__()" in text
    assert "dftracer.get_instance().log_event(name='custom'" in text or "log_event(name='custom'" in text, text
    assert "dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)" in text
    assert re.search(r"finalize\(\) -> None$", text, re.M)


def test_dftracer_dbg_native_module_logs_each_call(run):
    r = run(
        """
        import dftracer.dftracer as native
        import dftracer.dftracer_dbg as dbg
        names = [n for n in dir(native) if not n.startswith("__")]
        assert all(hasattr(dbg, n) for n in names), [n for n in names if not hasattr(dbg, n)]
        dbg.initialize(None, None, -1)
        t = dbg.get_time()
        dbg.log_event("ev", "cat", t, 3, {"a": 1}, None, None)
        dbg.finalize()
        """
    )
    lines = [l for l in r.stderr.splitlines() if l.startswith("[DFTRACER DEBUG]: [")]
    assert [l.split("] ", 1)[1].split("(")[0] for l in lines] == ["initialize", "get_time", "log_event", "finalize"]
    assert re.search(r"get_time\(\) -> \d+$", lines[1])
    ev = r.events("ev")
    assert len(ev) == 1 and ev[0]["args"]["a"] == 1 and ev[0]["dur"] == 3
