"""A small CNN trained on synthetic images read from files by a 4-worker DataLoader (fork),
the user's main job: `@df.log` on the Dataset's `__getitem__` and on the training step, I/O
of the data dir traced in process. Tracing off / ours / the reference, in alternating rounds;
medians of the time per epoch (after one warm-up epoch) and, for the traced runs, the events
written per second of epoch (events counted in the trace files: each process's own).

    python3 benches/python/torch_cnn.py --ours VENV --ref VENV [--rounds 5] [--record F]

Both venvs must see torch (scripts/bench.sh uses .venv-torch and .venv-torch-ref, which share
.venv-torch-site).
"""

import argparse
import atexit
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

N_IMAGES = 512
SIDE = 32
EPOCHS = 3  # the first is a warm-up (workers start, files enter the page cache)

TRAIN = r"""
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from dftracer.python import dftracer, dft_fn

data, out = sys.argv[1], sys.argv[2]
log = dftracer.initialize_log(logfile=os.path.join(out, "t.pfw"), data_dir=data, process_id=-1)
df = dft_fn("data")
train = dft_fn("train")
SIDE = int(os.environ["SIDE"])


class Images(Dataset):
    def __init__(self, root):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root))

    def __len__(self):
        return len(self.files)

    @df.log
    def __getitem__(self, image_idx):
        with open(self.files[image_idx], "rb") as f:
            raw = f.read()
        x = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float().view(3, SIDE, SIDE) / 255
        return x, image_idx % 10


model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(32 * (SIDE // 4) ** 2, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


@train.log
def step(x, y, epoch, step):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


if __name__ == "__main__":
    torch.set_num_threads(1)
    loader = DataLoader(Images(data), batch_size=32, num_workers=4, multiprocessing_context="fork",
                        persistent_workers=True)
    times = []
    for epoch in range(int(os.environ["EPOCHS"])):
        t0 = time.perf_counter()
        for i, (x, y) in enumerate(loader):
            step(x, y, epoch, i)
        times.append(time.perf_counter() - t0)
    del loader
    log.finalize()
    print(" ".join(str(t) for t in times))
"""


def env(enable, out):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    e.update(SIDE=str(SIDE), EPOCHS=str(EPOCHS), OMP_NUM_THREADS="1")
    if enable:
        e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
    return e


def events(out):
    """Events (complete records, not the tracer's own) in every trace file under `out`."""
    n = 0
    for f in Path(out).glob("*.pfw*"):
        opener = gzip.open if f.name.endswith(".gz") else open
        try:
            with opener(f, "rt", errors="replace") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and rec.get("ph") in (1, "X") and rec.get("cat") != "dftracer":
                        n += 1
        except (OSError, EOFError):
            pass
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--record")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    atexit.register(shutil.rmtree, work, True)  # the dataset: 126 MB in train_loop
    data = work / "data"
    data.mkdir()
    for i in range(N_IMAGES):
        (data / f"img_{i:05d}.bin").write_bytes(os.urandom(3 * SIDE * SIDE))
    script = work / "train.py"
    script.write_text(TRAIN)
    configs = {"off": (a.ours, False), "ours": (a.ours, True), "ref": (a.ref, True)}
    epoch_s = {k: [] for k in configs}
    rate = {k: [] for k in configs if k != "off"}
    counted = {}
    for _ in range(a.rounds):
        for name, (venv, enable) in configs.items():
            with tempfile.TemporaryDirectory() as out:
                r = subprocess.run([f"{venv}/bin/python", str(script), str(data), out], env=env(enable, out),
                                   capture_output=True, text=True, timeout=900)
                if r.returncode != 0:
                    sys.exit(f"{name} failed:\n{r.stderr[-3000:]}")
                times = [float(t) for t in r.stdout.split()]
                measured = times[1:]  # after the warm-up epoch
                epoch_s[name].append(statistics.median(measured))
                if enable:
                    n = events(out)
                    counted[name] = n
                    rate[name].append(n / sum(times))
    med = {k: statistics.median(v) for k, v in epoch_s.items()}
    med_rate = {k: statistics.median(v) for k, v in rate.items()}
    print(f"{'config':6} {'s/epoch':>9} {'vs off':>7} {'events/s':>10} {'events':>8}")
    for k, v in med.items():
        print(f"{k:6} {v:9.4f} {v / med['off']:7.3f} {med_rate.get(k, 0):10.0f} {counted.get(k, 0):8d}")
    if a.record:
        Path(a.record).write_text(json.dumps({
            "seconds_per_epoch": med,
            "ratio_vs_off": {k: v / med["off"] for k, v in med.items()},
            "events_per_second": med_rate,
            "events_per_run": counted,
            "workload": f"{N_IMAGES} images {SIDE}x{SIDE}x3 as files, batch 32, DataLoader(num_workers=4, fork, "
                        f"persistent), {EPOCHS} epochs (first is warm-up), 2-conv CNN, SGD, 1 torch thread",
            "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
            "command": " ".join(sys.argv),
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
