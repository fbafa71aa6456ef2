"""Where a training-like loop's tracing cost goes, per sample, in both threads: callgrind with
its cache simulation (this VM has no hardware counters: `perf` cannot count cache misses here),
so the figures are exact and repeat from run to run.

The loop is train_loop.py's (each sample: `read(path, step)` opening and reading a 64 KiB file
whole, then `compute(buf, step)`, both `@df.log`-decorated), over N files, in these configs:

  off          tracing off
  off+thread   tracing off, one idle C thread started first (train_loop.py's row: glibc's
               multi-threaded paths, the floor of a tracer that writes from its own thread)
  ours         tracing on, no I/O traced: 2 events per sample
  ours+io      tracing on, I/O bound in process (initialize_log(data_dir=...)): 2 decorated
               events and the sample's I/O (open, read x2, lseek x2, close, an FH record; the
               fstat x2 and isatty folded)

Each config runs at N/5 and N samples (one sample first, then a 0.3 s pause: the clock's
calibration, as in callgrind_check.py); per sample = the difference / (N - N/5), so start-up
cancels. For each: the calling thread until finalize (instructions; L1 instruction-cache,
L1 data-read and data-write misses of the simulated caches), and the instructions of every
thread to the end (the writer's encoding and compression of the sample's events included).
The tables give ours minus off, and for the calling thread the functions that add the most.
Traced runs hold every record until finalize (a 64 MiB ring, no timed flush) and read the
vDSO clock (DFTRACER_TSC=0; see env_for): the writer's count then does not depend on when it
woke. It still moves by a few % with the event times' digits (how many differ from line to
line: a loaded machine spreads them).

    python3 benches/python/loop_profile.py --python .venv-test/bin/python [--files 500] [--record F]
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHES = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCHES))
from callgrind_check import FINALIZE  # noqa: E402  (the function the first dump stops at)

LOOP = r"""
import os, sys, time
if os.environ.get("TRAIN_IDLE_THREAD"):
    import ctypes
    libc = ctypes.CDLL(None)
    libc.pthread_create(ctypes.byref(ctypes.c_ulong()), None, ctypes.cast(libc.pause, ctypes.c_void_p), None)
from dftracer.python import dftracer, dft_fn
data, out, io, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = dftracer.initialize_log(logfile=os.path.join(out, "t.pfw"),
                              data_dir=data if io == "io" else None, process_id=-1)
df = dft_fn("train")
@df.log
def read(path, step):
    with open(path, "rb") as f:
        return f.read()
@df.log
def compute(buf, step):
    return sum(buf[::4096])
files = sorted(os.path.join(data, f) for f in os.listdir(data))
compute(read(files[0], 0), 0)
time.sleep(0.3)
for step, f in enumerate(files[1:n + 1]):
    compute(read(f, step), step)
log.finalize()
"""

CONFIGS = {
    "off": (False, "noio", {}),
    "off+thread": (False, "noio", {"TRAIN_IDLE_THREAD": "1"}),
    "ours": (True, "noio", {}),
    "ours+io": (True, "io", {}),
}
EVENTS = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
SHOWN = ["Ir", "I1mr", "D1mr", "D1mw"]


def env_for(enable, out, extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    e["PYTHONHASHSEED"] = "0"  # dict layouts (and so the interpreter's counts) repeat
    if enable:
        e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
        # Every record held until finalize, then encoded as one stream: under valgrind the loop
        # runs for a minute, and the writer's timed drains (each push ends a deflate block)
        # would come as the machine's load allows, moving the writer's count by a few %. The
        # vDSO clock: over that minute the TSC's conversion is anchored again every 0.5 s,
        # and records drained at the end would be converted through the anchors' history
        # (~190 instructions an event), which a native run of the loop (30 ms) never does.
        e.update(DFTRACER_RING_SIZE=str(64 << 20), DFTRACER_FLUSH_INTERVAL_MS="600000",
                 DFTRACER_TSC="0")
    e.update(extra)
    return e


def totals(path: Path):
    """The event totals of a callgrind output file (None: a file with no counts, as the
    one `--separate-threads` leaves without a thread suffix)."""
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return [int(x) for x in line.split()[1:]]
    return None


def functions(path: Path, event: str) -> collections.Counter:
    """Self cost of each function in `path` for `event`."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", f"--show={event}",
                          f"--sort={event}", str(path)], capture_output=True, text=True, check=True).stdout
    got = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m or "=>" in line or "events annotated" in line or ":" not in m.group(2):
            continue
        name = m.group(2).split(" [")[0].strip()
        name = re.sub(r" \([\d,]+x\)$", "", name)
        # A function's recursion levels (`f'2`: called again below itself, as the interpreter
        # is when a decorator's C code calls the Python function) count as the function.
        name = re.sub(r"'\d+$", "", name)
        got[name.rsplit(":", 1)[-1] if "::" not in name else name.split(":", 1)[1]] += int(m.group(1).replace(",", ""))
    return got


def run(python: str, script: Path, data: Path, cfg: str, n: int, work: Path) -> dict:
    """One callgrind run of `n` samples: the calling thread's counts until finalize (and its
    file, for the per-function view) and every thread's instructions to the end."""
    enable, io, extra = CONFIGS[cfg]
    d = work / f"{cfg}-{n}"
    d.mkdir()
    out = d / "cg.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--separate-threads=yes",
                    f"--dump-before={FINALIZE}", f"--callgrind-out-file={out}",
                    python, str(script), str(data), str(d), io, str(n)],
                   env=env_for(enable, str(d), extra), check=True, capture_output=True)
    parts = {f.name: t for f in d.glob("cg.out*") if (t := totals(f)) is not None}
    # Untraced runs never call finalize: one part per thread (cg.out-01, ...).
    first = "cg.out.1-01" if "cg.out.1-01" in parts else "cg.out-01"
    return {"caller": parts[first], "caller_file": d / first,
            "other_files": [d / f for f in parts if f != first],
            "all_ir": sum(v[0] for v in parts.values())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="a python with our wheel installed")
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--record", help="write the figures to this JSON file")
    a = ap.parse_args()
    hi, lo = a.files, a.files // 5
    with tempfile.TemporaryDirectory() as w:
        work = Path(w)
        data = work / "data"
        data.mkdir()
        for i in range(hi + 1):
            (data / f"f{i:05d}.bin").write_bytes(os.urandom(64 << 10))
        script = work / "loop.py"
        script.write_text(LOOP)
        per = {}
        runs = {}
        for cfg in CONFIGS:
            print(f"loop_profile: {cfg}", flush=True)
            r_hi, r_lo = (run(a.python, script, data, cfg, n, work) for n in (hi, lo))
            runs[cfg] = (r_lo, r_hi)
            per[cfg] = {e: (x - y) / (hi - lo) for e, x, y in zip(EVENTS, r_hi["caller"], r_lo["caller"])}
            per[cfg]["all_Ir"] = (r_hi["all_ir"] - r_lo["all_ir"]) / (hi - lo)
        print(f"\nper sample, {hi - lo} samples (calling thread until finalize; all threads to the end)")
        print(f"{'config':12} " + " ".join(f"{e:>9}" for e in SHOWN) + f" {'all Ir':>9}")
        for cfg, v in per.items():
            print(f"{cfg:12} " + " ".join(f"{v[e]:9.1f}" for e in SHOWN) + f" {v['all_Ir']:9.1f}")
        added = {cfg: {e: per[cfg][e] - per["off"][e] for e in SHOWN + ["all_Ir"]} for cfg in per if cfg != "off"}
        print("\nadded over off")
        for cfg, v in added.items():
            print(f"{cfg:12} " + " ".join(f"{v[e]:9.1f}" for e in SHOWN) + f" {v['all_Ir']:9.1f}")
        top = {}
        for cfg in ("ours", "ours+io"):
            # The rest of the work: the writer thread, and finalize's drain on whichever thread.
            f = []
            for r in runs[cfg]:
                c = collections.Counter()
                for x in r["other_files"]:
                    c.update(functions(x, "Ir"))
                f.append(c)
            # Rust functions and libc's copies only: the dump at finalize also charges the
            # interpreter's frames on the calling thread's stack (`main`, `PyEval_EvalCode`...).
            rest = {k: (f[1][k] - f[0][k]) / (hi - lo) for k in set().union(*f)
                    if "::" in k or k.startswith("__mem")}
            rows = sorted(rest.items(), key=lambda kv: -abs(kv[1]))[:15]
            top[f"{cfg} writer"] = {"Ir": [[k[-100:], round(v, 1)] for k, v in rows]}
            print(f"\n{cfg}: the other threads and finalize (the writer's work), Ir per sample, by function")
            for k, v in rows:
                print(f"  {v:8.1f} {k[-100:]}")
        for cfg in ("ours", "ours+io"):
            top[cfg] = {}
            for event in ("Ir", "I1mr"):
                f = [functions(runs[c][i]["caller_file"], event) for c in ("off", cfg) for i in (0, 1)]
                diff = {k: ((f[3][k] - f[2][k]) - (f[1][k] - f[0][k])) / (hi - lo) for k in set().union(*f)}
                rows = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:15]
                top[cfg][event] = [[k[-100:], round(v, 1)] for k, v in rows]
                print(f"\n{cfg}: calling thread, {event} added per sample, by function")
                for k, v in rows:
                    print(f"  {v:8.1f} {k[-100:]}")
    if a.record:
        Path(a.record).write_text(json.dumps({
            "samples": hi - lo,
            "per_sample": {c: {k: round(v, 1) for k, v in d.items()} for c, d in per.items()},
            "added_over_off": {c: {k: round(v, 1) for k, v in d.items()} for c, d in added.items()},
            "top_functions": top,
            "command": " ".join(sys.argv),
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
