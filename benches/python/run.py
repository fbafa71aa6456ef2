"""Runs bench.py under tracing off, ours and the reference, in alternating rounds; prints a
table of medians and ratios and writes a JSON record; adds callgrind instructions per call.

    python3 benches/python/run.py --ours VENV_OURS --ref VENV_REF [--rounds 5] [--record F]
    python3 benches/python/run.py --ours VENV_OURS --failed-start [--rounds 3] [--record F]

`--failed-start`: ours only, tracing off against a start that failed (DFTRACER_LOG_FILE under a
regular file), same run, alternating rounds: a failed start must cost what tracing off costs.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import callgrind_check  # noqa: E402  (benches/callgrind_check.py: the one callgrind runner)
WORKLOADS = ["plain_f()", "plain_f(a,b=2)", "deco_f()", "deco_f(a,b=2)", "context_manager", "log_event_3args",
             "lock_ctx", "dicts_only", "log_event_inline"]
# What a workload's added cost is measured against (tracing off, ours): itself unless named.
BASELINE = {"deco_f()": "plain_f()", "deco_f(a,b=2)": "plain_f(a,b=2)", "log_event_inline": "dicts_only"}
# Callgrind cases (benches/callgrind_check.py's script): traced mode, baseline mode (tracing off).
CG_CASES = {"deco_f()": ("deco", "plain"), "context_manager": ("ctx", "lock"), "log_event_inline": ("log_event", "dicts")}


def env_for(enable: bool, out: str) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    if enable == "failed":
        # A regular file where the log directory should be: the start fails (one stderr line).
        Path(out, "blocker").write_text("not a directory")
        e.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=os.path.join(out, "blocker", "t"))
    elif enable:
        e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
    return e


def run_once(py: str, label: str, enable, calls: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([py, str(HERE / "bench.py"), label, out, str(calls)], env=env_for(enable, out),
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])


CG_FAILED = """
import sys
from dftracer.python import dftracer, dft_fn
import dftracer.dftracer as d
dftracer.initialize_log(logfile=None)
df = dft_fn("bench")
@df.log
def deco(): return 1
def ctx():
    with dft_fn("bench", name="r"): pass
def ev(): d.log_event("ev", "bench", 1, 10, {"step": 1})
f = {"deco": deco, "ctx": ctx, "log_event": ev}[sys.argv[1]]
for _ in range(int(sys.argv[3])): f()
"""


def failed_start(a) -> int:
    """Tracing off vs a failed start, ours only, alternating rounds of the same run."""
    py = f"{a.ours}/bin/python"
    configs = [("off", False), ("failed", "failed")]
    samples = {c: {w: [] for w in WORKLOADS} for c, _ in configs}
    for _ in range(a.rounds):
        for name, en in configs:
            res = run_once(py, name, en, a.calls)
            for w in WORKLOADS:
                samples[name][w].append(res[w])
    med = {n: {w: statistics.median(v) for w, v in d.items()} for n, d in samples.items()}
    rows = []
    print(f"{'workload':18} {'off ns':>8} {'failed ns':>10} {'failed-off':>10}")
    for w in WORKLOADS:
        rows.append(dict(workload=w, off=med["off"][w], failed=med["failed"][w],
                         failed_minus_off=med["failed"][w] - med["off"][w]))
        print(f"{w:18} {med['off'][w]:8.1f} {med['failed'][w]:10.1f} {med['failed'][w] - med['off'][w]:10.1f}")
    cg = {}
    if not a.no_callgrind:
        # Instructions per call (repeatable where nanoseconds drift on a shared machine).
        with tempfile.TemporaryDirectory() as out:
            script = Path(out) / "cg_failed.py"
            script.write_text(CG_FAILED)
            for which in ("deco", "ctx", "log_event"):
                for name, en in configs:
                    env = env_for(en, out)
                    env["PYTHONHASHSEED"] = "0"  # else dict layouts move counts by ~100/call
                    cg[f"{which}_{name}"] = float(callgrind_check.per_call(
                        lambda n: [py, str(script), which, out, str(n)], env))
                print(f"callgrind instructions per call, {which}: off {cg[which + '_off']:.0f}, "
                      f"failed start {cg[which + '_failed']:.0f}")
    if a.record:
        record = {"machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version()},
                  "command": " ".join(sys.argv), "rounds": a.rounds, "calls": a.calls, "median_ns": rows,
                  "callgrind_per_call": cg}
        Path(a.record).parent.mkdir(parents=True, exist_ok=True)
        Path(a.record).write_text(json.dumps(record, indent=2) + "\n")
        print(f"record: {a.record}")
    return 0


def per_call(py: str, which: str, enable: bool) -> "callgrind_check.Count":
    """Instructions per call, all threads and the calling thread, as the regression check
    measures them."""
    with tempfile.TemporaryDirectory() as out:
        script = Path(out) / "cg.py"
        script.write_text(callgrind_check.PY)
        env = env_for(enable, out)
        return callgrind_check.per_call(lambda n: [py, str(script), which, out, str(n)], env)


def callgrind_figures(ours_py: str, ref_py: str) -> dict:
    """Per case: instructions per call of the baseline (tracing off), ours and the reference,
    in all threads and in the calling thread (until finalize)."""
    cg = {}
    for case, (mode, base_mode) in CG_CASES.items():
        base = per_call(ours_py, base_mode, False)
        ours, ref = per_call(ours_py, mode, True), per_call(ref_py, mode, True)
        cg[case] = {"baseline": base_mode, "base": base.total, "ours": ours.total, "ref": ref.total,
                    "ours_added": ours.total - base.total, "ref_added": ref.total - base.total,
                    "calling_thread": {"base": base.caller, "ours": ours.caller, "ref": ref.caller,
                                       "ours_added": ours.caller - base.caller,
                                       "ref_added": ref.caller - base.caller}}
        if case == "context_manager":
            off = per_call(ours_py, mode, False)
            cg[case]["off"] = off.total
            cg[case]["off_added"] = off.total - base.total
        c = cg[case]
        print(f"callgrind instructions per call, {case} (vs {base_mode}, tracing off): all threads ours "
              f"+{c['ours_added']:.0f}, ref +{c['ref_added']:.0f}; calling thread ours "
              f"+{c['calling_thread']['ours_added']:.0f}, ref +{c['calling_thread']['ref_added']:.0f}"
              + (f"; tracing off +{c['off_added']:.0f}" if "off" in c else ""))
    return cg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--ref")
    ap.add_argument("--failed-start", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--record")
    ap.add_argument("--no-callgrind", action="store_true")
    a = ap.parse_args()
    if a.failed_start:
        return failed_start(a)
    if not a.ref:
        ap.error("--ref is required (except with --failed-start)")
    ours_py, ref_py = f"{a.ours}/bin/python", f"{a.ref}/bin/python"
    configs = [("off", ours_py, False), ("ours", ours_py, True), ("ref", ref_py, True)]
    samples = {c[0]: {w: [] for w in WORKLOADS} for c in configs}
    load_before = os.getloadavg()[0]  # other work on the machine: nanoseconds move with it
    for r in range(a.rounds):
        for name, py, en in configs:  # alternating rounds: noise hits all three alike
            res = run_once(py, name, en, a.calls)
            for w in WORKLOADS:
                samples[name][w].append(res[w])
    med = {n: {w: statistics.median(v) for w, v in d.items()} for n, d in samples.items()}
    rows = []
    print(f"{'workload':18} {'off ns':>8} {'ours ns':>8} {'ref ns':>9} {'ours+':>7} {'ref+':>9} {'ref+/ours+':>10}")
    for w in WORKLOADS:
        base = med["off"][BASELINE.get(w, w)]
        ours_add = med["ours"][w] - base
        ref_add = med["ref"][w] - base
        ratio = ref_add / ours_add if ours_add > 0 else float("inf")
        rows.append(dict(workload=w, baseline=BASELINE.get(w, w), off=med["off"][w], ours=med["ours"][w],
                         ref=med["ref"][w], ours_added=ours_add, ref_added=ref_add, ratio=ratio))
        print(f"{w:18} {med['off'][w]:8.0f} {med['ours'][w]:8.0f} {med['ref'][w]:9.0f} {ours_add:7.0f} {ref_add:9.0f} {ratio:10.1f}")
    # The issue's targets, from the same run.
    targets = {
        "ctx_off_over_lock": med["off"]["context_manager"] / med["off"]["lock_ctx"],
        "ctx_on_minus_off_ns": med["ours"]["context_manager"] - med["off"]["context_manager"],
        "ref_ctx_minus_off_ns": med["ref"]["context_manager"] - med["off"]["context_manager"],
        "log_event_inline_beyond_dicts_ns": med["ours"]["log_event_inline"] - med["off"]["dicts_only"],
        "ref_log_event_inline_beyond_dicts_ns": med["ref"]["log_event_inline"] - med["off"]["dicts_only"],
    }
    print(f"with dft_fn(...) inline, tracing off / with threading.Lock(): {targets['ctx_off_over_lock']:.2f}x "
          f"(target <= 1.2); tracing on - off: {targets['ctx_on_minus_off_ns']:.0f} ns (target <= 150; "
          f"ref {targets['ref_ctx_minus_off_ns']:.0f} ns)")
    print(f"log_event with inline dicts beyond building them: {targets['log_event_inline_beyond_dicts_ns']:.0f} ns "
          f"(target <= 150; ref {targets['ref_log_event_inline_beyond_dicts_ns']:.0f} ns)")
    load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"load average (1 min) before and after the rounds: {load[0]}, {load[1]} on {os.cpu_count()} CPUs")
    record = {"machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
                          "loadavg_1min_before_after": load},
              "command": " ".join(sys.argv), "rounds": a.rounds, "calls": a.calls, "median_ns": rows,
              "targets": targets}
    if not a.no_callgrind:
        record["callgrind_per_call"] = callgrind_figures(ours_py, ref_py)
    if a.record:
        Path(a.record).parent.mkdir(parents=True, exist_ok=True)
        Path(a.record).write_text(json.dumps(record, indent=2) + "\n")
        print(f"record: {a.record}")
    return 0


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
