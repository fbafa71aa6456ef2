"""Nesting across layers after rounding to the time unit (FORMAT.md, "Time and nesting"): one
clock per process and both ends of every event truncated to the unit, so an I/O call made
inside a decorated function lies within that function's event ([ts, ts+dur] closed) and
consecutive events of a thread never overlap (they may touch), whatever the unit; with
`DFTRACER_TIME_METRIC=NS` dftracer_view's call tree puts every call at its true depth."""

import json
import os
import subprocess
from collections import defaultdict

import pytest

TRAIN = """
import os
from dftracer.python import dftracer, dft_fn
DATA = os.environ["DATA"]
log = dftracer.initialize_log(logfile=os.environ["OUT"] + "/run.pfw", data_dir=DATA, process_id=-1)
data = dft_fn("data")
comp = dft_fn("compute")

@data.log
def load(i):
    with open(f"{DATA}/s{i % 8}.bin", "rb") as fh:
        b = fh.read()
    os.stat(f"{DATA}/s{i % 8}.bin")
    return len(b)

@comp.log
def forward(n):
    return sum(range(n % 97))

@comp.log
def step(i):
    return forward(load(i))

for i in range(int(os.environ.get("STEPS", "300"))):
    step(i)
log.finalize()
"""

DEPTH = {"step": 0, "load": 1, "forward": 1}


def run_training(run, tmp_path, metric):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for i in range(8):
        (data / f"s{i}.bin").write_bytes(os.urandom(1000 + 512 * i))
    return run(TRAIN, env={"DATA": str(data), "DFTRACER_TIME_METRIC": metric})


def check_nesting(events):
    """Every I/O event inside a `load` of its thread, every `load`/`forward` inside a
    `step`, consecutive events of one depth in a thread disjoint (closed intervals)."""
    by_tid = defaultdict(list)
    for e in events:
        by_tid[e["tid"]].append(e)
    io_count = 0
    for evs in by_tid.values():
        loads = [e for e in evs if e["name"] == "load"]
        steps = [e for e in evs if e["name"] == "step"]
        inside = lambda c, p: p["ts"] <= c["ts"] and c["ts"] + c["dur"] <= p["ts"] + p["dur"]
        for e in evs:
            if e["type"] == 3:
                io_count += 1
                assert any(inside(e, p) for p in loads), f"I/O event outside every load: {e}"
            elif e["name"] in ("load", "forward"):
                assert any(inside(e, p) for p in steps), f"{e['name']} outside every step: {e}"
        # Consecutive events in the order they ended (the file's order in a thread): the
        # steps one after another, and in each step its load before its forward.
        for name in ("step", "load", "forward"):
            same = [e for e in evs if e["name"] == name]
            for a, b in zip(same, same[1:]):
                assert a["ts"] + a["dur"] <= b["ts"], f"consecutive {name} events overlap: {a} {b}"
        calls = [e for e in evs if e["name"] in DEPTH]
        for i, e in enumerate(calls):
            if e["name"] == "step":
                load, fwd = calls[i - 2], calls[i - 1]
                assert (load["name"], fwd["name"]) == ("load", "forward")
                assert load["ts"] + load["dur"] <= fwd["ts"], f"siblings overlap: {load} {fwd}"
                assert inside(load, e) and inside(fwd, e)
    return io_count


@pytest.mark.parametrize("metric", ["US", "MS", "NS"])
def test_io_inside_its_function_after_rounding(run, tmp_path, metric):
    r = run_training(run, tmp_path, metric)
    events = r.events()
    assert sum(1 for e in events if e["name"] == "step") == 300
    io = check_nesting(events)
    # open, fstat, read(s), close and stat per load.
    assert io >= 300 * 4, io
    if metric == "MS":
        # Most calls are far shorter than the unit: zero durations, still nested.
        assert sum(1 for e in events if e["dur"] == 0) > len(events) // 2


def test_call_tree_depths_with_nanoseconds(run, tmp_path):
    validate = os.environ.get("DFTRACER_VALIDATE")
    if not validate:
        pytest.skip("needs dftracer-utils 0.0.14 (scripts/test.sh sets DFTRACER_VALIDATE)")
    view = os.path.join(os.path.dirname(validate), "dftracer_view")
    r = run_training(run, tmp_path, "NS")
    (trace,) = r.files()
    out = subprocess.run(
        [view, "--files", str(trace), "--call-tree", "--log-level", "off", "--index-dir", str(tmp_path / "idx")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    io_names = {e["name"] for e in r.events() if e["type"] == 3}
    checked = wrong = 0
    for row in rows:
        want = DEPTH.get(row["name"], 2 if row["name"] in io_names else None)
        if want is None:
            continue
        checked += 1
        wrong += row["level"] != want
    assert checked >= 300 * 7, checked
    assert wrong == 0, f"{wrong} of {checked} events at the wrong depth"
