"""Training-like loop: 2,000 files of 64 KiB read inside annotated functions plus a small
compute step; tracing off, ours, ours + I/O interception (our preload, and bound in process
from initialize_log(data_dir=...)), the reference, and the reference with its I/O interception.
Then the time of initialize_log with numpy imported (with and without binding I/O), and
multiprocessing Pool(2) fork/spawn lost-event counts.

    python3 benches/python/train_loop.py --ours VENV --ref VENV --preload SO [--rounds 5] [--record F]
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = r"""
import os, sys, time
from dftracer.python import dftracer, dft_fn
data = sys.argv[1]
log = dftracer.initialize_log(logfile=os.path.join(sys.argv[2], "t.pfw"),
                              data_dir=data if sys.argv[3] == "io" else None, process_id=-1)
df = dft_fn("train")
@df.log
def read(path, step):
    with open(path, "rb") as f:
        return f.read()
@df.log
def compute(buf, step):
    return sum(buf[::4096])
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


def env(enable, out, extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    if enable:
        e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
    e.update(extra or {})
    return e


def count(out, name):
    n = 0
    for f in Path(out).glob("*.pfw*"):
        try:
            with gzip.open(f, "rt") as fh:
                n += sum(1 for line in fh if f'"name":"{name}"' in line)
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
    data = work / "data"
    data.mkdir()
    for i in range(2000):
        (data / f"f{i:05d}.bin").write_bytes(os.urandom(64 * 1024))
    script = work / "loop.py"
    script.write_text(LOOP)
    ours, ref = f"{a.ours}/bin/python", f"{a.ref}/bin/python"
    configs = {
        "off": (ours, False, "noio", {}),
        "ours": (ours, True, "noio", {}),
        "ours+io": (ours, True, "io", {"LD_PRELOAD": a.preload, "DFTRACER_INIT": "PRELOAD",
                                      "DFTRACER_DATA_DIR": str(data)}),
        # I/O bound in process by initialize_log(data_dir=...): no LD_PRELOAD.
        "ours+io-inproc": (ours, True, "io", {}),
        "ref": (ref, True, "noio", {}),
        "ref+io": (ref, True, "io", {}),
    }
    times = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (py, en, io, extra) in configs.items():
            with tempfile.TemporaryDirectory() as out:
                r = subprocess.run([py, str(script), str(data), out, io], env=env(en, out, extra),
                                   capture_output=True, text=True, check=True)
                times[name].append(float(r.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'config':14} {'median s':>9} {'vs off':>7}")
    for k, v in med.items():
        print(f"{k:14} {v:9.4f} {v / med['off']:7.3f}")
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
                                              "initialize_ms_numpy": init_ms,
                                              "command": " ".join(sys.argv)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
