"""Training-like loop: 2,000 files of 64 KiB read inside annotated functions plus a small
compute step; tracing off, ours, ours + I/O interception (our preload, and bound in process
from initialize_log(data_dir=...)), the reference, and the reference with its I/O interception;
and, as `<config>/warm` (against `off/warm`), the same loop timed after an untimed pass over
2,000 other files: a run past its start (the clock calibrated, rings and buffers mapped).
`off+thread` is the untraced loop with one idle C thread started first: the floor of any tracer
that writes from a thread of its own (glibc leaves its single-threaded fast paths for good once
a second thread exists).
Then the same loop split over 8 DataLoader-style worker processes (forked, as torch's
DataLoader forks on Linux) on the machine's cores: CPU per sample over all processes and
threads (the writers' included), tracing off, ours, the reference, with I/O traced in process,
and every sample's events counted in the traces. Then the time of initialize_log with numpy
imported (with and without binding I/O), and multiprocessing Pool(2) fork/spawn lost-event
counts.

    python3 benches/python/train_loop.py --ours VENV --ref VENV --preload SO [--rounds 5] [--record F]
"""

import argparse
import atexit
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = r"""
import os, sys, time
from dftracer.python import dftracer, dft_fn
if os.environ.get("TRAIN_IDLE_THREAD"):
    # The floor of any tracer with a writer thread: one idle thread (not Python's), which
    # switches glibc out of its single-threaded paths (system calls' cancellation handling,
    # malloc's and stdio's locks) for the rest of the process.
    import ctypes
    libc = ctypes.CDLL(None)
    libc.pthread_create(ctypes.byref(ctypes.c_ulong()), None, ctypes.cast(libc.pause, ctypes.c_void_p), None)
data = sys.argv[1]
warm = sys.argv[4] if len(sys.argv) > 4 else None
dirs = data + (":" + warm if warm else "")
log = dftracer.initialize_log(logfile=os.path.join(sys.argv[2], "t.pfw"),
                              data_dir=dirs if sys.argv[3] == "io" else None, process_id=-1)
df = dft_fn("train")
@df.log
def read(path, step):
    with open(path, "rb") as f:
        return f.read()
@df.log
def compute(buf, step):
    return sum(buf[::4096])
if warm:
    # Untimed: the same loop over other files first (a run past its first 100 ms: the clock
    # calibrated, the ring's pages mapped, the interpreter's caches warm).
    for step, f in enumerate(sorted(os.path.join(warm, f) for f in os.listdir(warm))):
        compute(read(f, step), step)
files = sorted(os.path.join(data, f) for f in os.listdir(data))
t0 = time.perf_counter()
for step, f in enumerate(files):
    compute(read(f, step), step)
dt = time.perf_counter() - t0
log.finalize()
print(dt)
"""

INIT = r"""
import os, sys, time
import numpy
from dftracer.python import dftracer
t0 = time.perf_counter()
log = dftracer.initialize_log(logfile=os.path.join(sys.argv[2], "t.pfw"),
                              data_dir=sys.argv[1] if sys.argv[3] == "io" else None, process_id=-1)
dt = time.perf_counter() - t0
log.finalize()
print(dt * 1000)
"""

MP = r"""
import os, sys, multiprocessing as mp
from dftracer.python import dftracer, dft_fn
df = dft_fn("WORK")
@df.log
def task(x): return x * x
def main():
    log = dftracer.initialize_log(logfile=os.path.join(sys.argv[2], "t.pfw"), data_dir=None, process_id=-1)
    for i in range(5): task(i)
    with mp.get_context(sys.argv[1]).Pool(2) as p: p.map(task, range(40))
    log.finalize()
if __name__ == "__main__": main()
"""


# 8 forked workers, each reading its share of the files inside decorated functions.
WORKERS = r"""
import os, sys, multiprocessing as mp
from dftracer.python import dftracer, dft_fn
df = dft_fn("train")
@df.log
def read(path, step):
    with open(path, "rb") as f:
        return f.read()
@df.log
def compute(buf, step):
    return sum(buf[::4096])
def worker(paths):
    for step, f in enumerate(paths):
        compute(read(f, step), step)
if __name__ == "__main__":
    data = sys.argv[1]
    log = dftracer.initialize_log(logfile=os.path.join(sys.argv[2], "t.pfw"),
                                  data_dir=data if sys.argv[3] == "io" else None, process_id=-1)
    files = sorted(os.path.join(data, f) for f in os.listdir(data))
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(files[i::8],)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    log.finalize()
"""


def children_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def env(enable, out, extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    if enable:
        e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
    e.update(extra or {})
    return e


def count(out, name, cat=None):
    n = 0
    want = f'"name":"{name}"' + (f',"cat":"{cat}"' if cat else "")
    for f in Path(out).glob("*.pfw*"):
        try:
            with gzip.open(f, "rt") as fh:
                n += sum(1 for line in fh if want in line)
        except (OSError, EOFError):
            pass
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--preload", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--record")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, work, True)  # the datasets: 2 x 126 MB
    data = work / "data"
    data.mkdir()
    warm = work / "warm"
    warm.mkdir()
    for i in range(2000):
        (data / f"f{i:05d}.bin").write_bytes(os.urandom(64 * 1024))
        (warm / f"w{i:05d}.bin").write_bytes(os.urandom(64 * 1024))
    script = work / "loop.py"
    script.write_text(LOOP)
    ours, ref = f"{a.ours}/bin/python", f"{a.ref}/bin/python"
    configs = {
        "off": (ours, False, "noio", {}),
        # Untraced, with one idle thread started first: what a second thread alone costs the
        # loop (see LOOP).
        "off+thread": (ours, False, "noio", {"TRAIN_IDLE_THREAD": "1"}),
        "ours": (ours, True, "noio", {}),
        "ours+io": (ours, True, "io", {"LD_PRELOAD": a.preload, "DFTRACER_INIT": "PRELOAD",
                                      "DFTRACER_DATA_DIR": str(data)}),
        # I/O bound in process by initialize_log(data_dir=...): no LD_PRELOAD.
        "ours+io-inproc": (ours, True, "io", {}),
        "ref": (ref, True, "noio", {}),
        "ref+io": (ref, True, "io", {}),
        # The same loop after an untimed pass over 2,000 other files (steady state).
        "off/warm": (ours, False, "noio", {}),
        "ours+io-inproc/warm": (ours, True, "io", {}),
        "ref+io/warm": (ref, True, "io", {}),
    }
    times = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (py, en, io, extra) in configs.items():
            with tempfile.TemporaryDirectory() as out:
                args = [str(warm)] if name.endswith("/warm") else []
                r = subprocess.run([py, str(script), str(data), out, io, *args], env=env(en, out, extra),
                                   capture_output=True, text=True, check=True)
                times[name].append(float(r.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'config':20} {'median s':>9} {'vs off':>7}")
    for k, v in med.items():
        base = med["off/warm"] if k.endswith("/warm") else med["off"]
        print(f"{k:20} {v:9.4f} {v / base:7.3f}")
    # 8 DataLoader-style workers: CPU of every process and thread per sample (getrusage of the
    # waited-for children: the workers are waited for by their parent, which is waited for here).
    w_script = work / "workers.py"
    w_script.write_text(WORKERS)
    w_configs = {"off": (ours, False), "ours+io-inproc": (ours, True), "ref+io": (ref, True)}
    w_cpu = {k: [] for k in w_configs}
    w_events = {}
    for _ in range(a.rounds):
        for name, (py, en) in w_configs.items():
            with tempfile.TemporaryDirectory() as out:
                c0 = children_cpu()
                subprocess.run([py, str(w_script), str(data), out, "io"], env=env(en, out),
                               capture_output=True, text=True, check=True)
                w_cpu[name].append((children_cpu() - c0) / 2000 * 1e6)
                if en:
                    # Every sample's two decorated calls and its read, in every worker's file.
                    w_events[name] = {"read": count(out, "read", "train"),
                                      "compute": count(out, "compute", "train")}
    w_med = {k: statistics.median(v) for k, v in w_cpu.items()}
    w_added = {k: v - w_med["off"] for k, v in w_med.items() if k != "off"}
    print("8 workers, CPU us per sample (all processes and threads): "
          + ", ".join(f"{k}={v:.1f}" for k, v in w_med.items())
          + "; added: " + ", ".join(f"{k}=+{v:.1f}" for k, v in w_added.items())
          + f"; events: {w_events}")
    for name, ev in w_events.items():
        if ev != {"read": 2000, "compute": 2000}:
            print(f"train_loop: {name}: the workers' traces hold {ev} decorated events, not 2,000 each")
            return 1
    # What initialize_log costs with numpy imported, with and without binding I/O in process.
    init_script = work / "init.py"
    init_script.write_text(INIT)
    init_ms = {}
    for io in ("noio", "io"):
        runs = []
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory() as out:
                r = subprocess.run([ours, str(init_script), str(data), out, io], env=env(True, out),
                                   capture_output=True, text=True, check=True)
                runs.append(float(r.stdout.strip().splitlines()[-1]))
        init_ms[io] = statistics.median(runs)
    init_ms["binding"] = init_ms["io"] - init_ms["noio"]
    print("initialize_log with numpy imported, ms: " + ", ".join(f"{k}={v:.2f}" for k, v in init_ms.items()))
    mp_script = work / "mp.py"
    mp_script.write_text(MP)
    lost = {}
    for impl, py in (("ours", ours), ("ref", ref)):
        for method in ("fork", "spawn"):
            with tempfile.TemporaryDirectory() as out:
                subprocess.run([py, str(mp_script), method, out], env=env(True, out), capture_output=True, check=False)
                lost[f"{impl}/{method}"] = 45 - count(out, "task")
    print("Pool(2) lost task events (of 45): " + ", ".join(f"{k}={v}" for k, v in lost.items()))
    if a.record:
        Path(a.record).write_text(json.dumps({"median_seconds": med, "lost_pool_events": lost,
                                              "workers8_cpu_us_per_sample": w_med,
                                              "workers8_cpu_us_added_per_sample": w_added,
                                              "initialize_ms_numpy": init_ms,
                                              "command": " ".join(sys.argv)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
