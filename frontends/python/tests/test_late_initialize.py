"""A late `initialize_log` wins (DLIO's order: decorated `__init__`s run, and start the tracer
from the environment, before `initialize_log(data_dir="<data>:<checkpoints>")`), in process and
under LD_PRELOAD; `DFTRACER_INIT` decides who intercepts I/O, as in the reference; the clock
goes on after `finalize()` and an event logged then is dropped and counted, never an error."""

import os
from pathlib import Path

from test_io_in_process import end_record, files_by_hash, io_events

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"

# Decorated work before initialize_log (as DLIO's decorated constructors), then the call with
# other data dirs and another log file, then I/O in each directory; the environment's data
# dir is OLD. Prints what children would inherit.
LATE = """
import os
from dftracer.python import dftracer, dft_fn
df = dft_fn("setup")

@df.log
def early():
    return 1

def touch(d):
    fd = os.open(d + "/f.bin", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 16)
    os.close(fd)

early()
touch(os.environ["OLD"])          # traced: the environment's dir, bound by the implicit start
touch(os.environ["CKPT"])         # not yet: initialize_log has not named it
log = dftracer.initialize_log(logfile=os.environ["OUT"] + "/late.pfw",
                              data_dir=os.environ["DATA"] + ":" + os.environ["CKPT"], process_id=-1)
early()
for d in ("DATA", "CKPT", "OLD"):
    touch(os.environ[d])
print("child env", os.environ.get("DFTRACER_DATA_DIR"), os.environ.get("DFTRACER_LOG_FILE"))
log.finalize()
"""


def dirs(tmp_path):
    out = {}
    for name in ("old", "data", "ckpt"):
        d = tmp_path / name
        d.mkdir()
        out[name.upper()] = str(d)
    return out


def opens_by_dir(r):
    fh = files_by_hash(r)
    got = {}
    for e in io_events(r, "open"):
        path = fh.get(e["args"].get("fhash"), "")
        got[os.path.basename(os.path.dirname(path))] = got.get(os.path.basename(os.path.dirname(path)), 0) + 1
    return got


def check_late(r, tmp_path):
    (trace,) = r.files()
    # logfile applied: the file (with the events from before the call) is named by it.
    assert trace.name.startswith("late-") and trace.name.endswith("-app.pfw.gz"), trace
    assert [e["name"] for e in r.events() if e["type"] == 6] == ["early", "early"]
    # data_dir applied: after the call, DATA and CKPT are traced (and OLD still, the
    # environment's, joined as initialize_log's data_dirs always are); before it, only OLD.
    assert opens_by_dir(r) == {"old": 2, "data": 1, "ckpt": 1}, opens_by_dir(r)
    data, ckpt, old = (str(tmp_path / n) for n in ("data", "ckpt", "old"))
    assert f"child env {data}:{ckpt}:{old} {tmp_path / 'out' / 'late'}" in r.stdout, r.stdout
    lines = [l for l in r.stderr.splitlines() if "initialize" in l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("[DFTRACER INFO] initialize: tracing had started before it"), lines
    assert f"I/O traced under {data}:{ckpt}:{old} (was {old})" in lines[0], lines
    assert f"log file prefix {tmp_path / 'out' / 'late'}" in lines[0] and "LD_PRELOAD" not in lines[0], lines
    assert end_record(r)["args"]["num_events"] > 0


def test_late_initialize_log_applies_data_dir_and_logfile_in_process(run, tmp_path):
    d = dirs(tmp_path)
    r = run(LATE, env={**d, "DFTRACER_DATA_DIR": d["OLD"]})
    check_late(r, tmp_path)


def test_late_initialize_log_applies_data_dir_under_the_preload(run, tmp_path):
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    d = dirs(tmp_path)
    r = run(LATE, env={**d, "DFTRACER_DATA_DIR": d["OLD"], "LD_PRELOAD": str(PRELOAD), "DFTRACER_INIT": "PRELOAD"})
    (trace,) = r.files()
    assert trace.name.startswith("late-") and trace.name.endswith("-app.pfw.gz"), trace
    assert opens_by_dir(r) == {"old": 2, "data": 1, "ckpt": 1}, opens_by_dir(r)
    (line,) = [l for l in r.stderr.splitlines() if "initialize" in l]
    assert "an earlier event or LD_PRELOAD" in line and f"(was {d['OLD']})" in line, line


def test_same_data_dir_again_changes_nothing_and_says_nothing(run, tmp_path):
    d = dirs(tmp_path)
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        with dft_fn("setup", name="early"):
            pass
        dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        with open(os.environ["OLD"] + "/f.bin", "w") as f:
            f.write("x")
        """,
        env={**d, "DFTRACER_DATA_DIR": d["OLD"]},
    )
    assert "initialize" not in r.stderr, r.stderr
    (trace,) = r.files()
    assert "-app.pfw.gz" in trace.name and trace.name.startswith("trace-"), trace
    assert opens_by_dir(r) == {"old": 1}


IO = """
import os
from dftracer.python import dftracer, dft_fn
log = dftracer.initialize_log(logfile=None, data_dir=os.environ["DATA"], process_id=-1)
with dft_fn("app", name="work"):
    with open(os.environ["DATA"] + "/f.txt", "w") as f:
        f.write("hello")
log.finalize()
"""


def test_dftracer_init_function_binds_io_in_process(run, tmp_path):
    d = dirs(tmp_path)
    r = run(IO, env={**d, "DFTRACER_INIT": "FUNCTION"})
    assert {e["cat"] for e in io_events(r)} >= {"POSIX"}, [e["name"] for e in io_events(r)]
    assert end_record(r)["args"]["cfg"]["bind"] == 1


def test_dftracer_init_hybrid_and_preload_without_the_preload_trace_no_io(run, tmp_path):
    # The reference binds I/O in process only for FUNCTION; PRELOAD leaves it to the preload
    # library (absent here); any other value, HYBRID included, binds nothing. HYBRID is a value
    # of the reference's: no warning for it.
    d = dirs(tmp_path)
    for mode in ("HYBRID", "PRELOAD", "NONE"):
        r = run(IO, env={**d, "DFTRACER_INIT": mode})
        assert [e["name"] for e in r.events()] == ["work"], (mode, [e["name"] for e in r.events()])
        assert end_record(r)["args"]["cfg"]["bind"] == 0, mode
        assert "DFTRACER_INIT" not in r.stderr, (mode, r.stderr)
        for f in r.files():
            f.unlink()


def test_the_clock_goes_on_after_finalize_and_a_late_event_is_dropped_and_counted(run, tmp_path):
    r = run(
        """
        import dftracer.dftracer as n
        n.initialize(None, None, -1)
        t0 = n.get_time()
        n.log_event("kept", "app", t0, 1)
        n.finalize()
        t1 = n.get_time()
        assert t1 >= t0 > 0, (t0, t1)
        # pydftracer's wrapper around a function that finalized (DLIO): end - start, then log.
        n.log_event("late", "app", t0, t1 - t0)
        n.log_event(name="late2", cat="app", start_time=t0, duration=t1 - t0, int_args={"k": 1})
        print("after_finalize", n.stats()["after_finalize"])
        """
    )
    assert "after_finalize 2" in r.stdout, r.stdout
    assert [e["name"] for e in r.events()] == ["kept"]
    warn = [l for l in r.stderr.splitlines() if "after finalize()" in l]
    assert len(warn) == 1 and warn[0].startswith("[DFTRACER WARN]"), r.stderr
