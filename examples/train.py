"""A training-like run traced with dftracer.python: a dataset of files read by DataLoader-style
worker processes (multiprocessing, spawn), annotated compute steps, a checkpoint write.
Afterwards it reads every trace file back and prints where they are and a summary.

    DFTRACER_ENABLE=1 python examples/train.py --out ./dft-demo
"""

import argparse
import gzip
import json
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from pathlib import Path

from dftracer.python import dft_fn, dftracer

data = dft_fn("data")
compute = dft_fn("compute")
ckpt = dft_fn("checkpoint")


class FileDataset:
    """Samples are files; workers only import this module (no tracer code of their own)."""

    def __init__(self, root: str, n: int):
        self.files = [os.path.join(root, f"sample_{i:04d}.bin") for i in range(n)]

    def __len__(self) -> int:
        return len(self.files)

    @data.log
    def __getitem__(self, image_idx: int) -> int:
        with open(self.files[image_idx], "rb") as fh:
            return sum(fh.read()[:4096:64])


def _worker(ds: FileDataset, indices, out_q) -> None:
    for i in indices:
        out_q.put((i, ds[i]))


class Loader:
    """A minimal DataLoader: `workers` spawned processes feed a queue."""

    def __init__(self, ds: FileDataset, workers: int):
        self.ds, self.workers = ds, workers

    def __iter__(self):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        shards = [list(range(w, len(self.ds), self.workers)) for w in range(self.workers)]
        procs = [ctx.Process(target=_worker, args=(self.ds, s, q)) for s in shards]
        for p in procs:
            p.start()
        for _ in range(len(self.ds)):
            yield q.get()
        for p in procs:
            p.join()


@compute.log
def train_step(epoch: int, step: int, sample: int) -> float:
    acc = 0.0
    for k in range(2000):
        acc += (sample * k) % 7
    return acc


@ckpt.log
def save_checkpoint(path: str, epoch: int) -> None:
    with open(path, "wb") as fh:
        fh.write(os.urandom(256 * 1024))


def summarize(out: Path) -> dict:
    files = sorted(out.glob("*.pfw*"))
    per_name, io_per_name, per_pid, counted = Counter(), Counter(), Counter(), Counter()
    for f in files:
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt") as fh:
            for line in fh:
                rec = json.loads(line)
                if rec.get("ph") == 1 and rec.get("cat") != "dftracer":
                    io = rec.get("cat") in ("POSIX", "STDIO")
                    (io_per_name if io else per_name)[rec["name"]] += 1
                    per_pid[rec["pid"]] += 1
                elif rec.get("ph") == 3:
                    # Calls counted in a ph 3 record, not written one by one (FORMAT.md
                    # "Folded calls": Python's open() makes two fstat64s and an isatty).
                    counted[rec["name"]] += rec["args"].get("dft_cnt", 0)
    return {
        "files": files,
        "events": sum(per_name.values()),
        "io_events": sum(io_per_name.values()),
        "by_name": per_name,
        "io_by_name": io_per_name,
        "counted": counted,
        "processes": len(per_pid),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="./dft-demo")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    dataset_dir = out / "dataset"
    dataset_dir.mkdir(parents=True, exist_ok=True)
    for i in range(a.samples):
        p = dataset_dir / f"sample_{i:04d}.bin"
        if not p.exists():
            p.write_bytes(os.urandom(64 * 1024))

    # I/O on files under the data dir is traced in process (no LD_PRELOAD): this process gets it
    # from initialize_log, the spawned workers (which only import this module) from the
    # environment they inherit.
    os.environ.setdefault("DFTRACER_DATA_DIR", str(dataset_dir))
    log = dftracer.initialize_log(logfile=str(out / "traces" / "train.pfw"), data_dir=str(dataset_dir))
    log.set_app_metadata_string("model", "toy")
    log.set_app_metadata_int("samples", a.samples)
    ds = FileDataset(str(dataset_dir), a.samples)
    t0 = time.time()
    for epoch in compute.iter(range(a.epochs), name="epoch", iter_name="epoch"):
        for step, (idx, sample) in enumerate(Loader(ds, a.workers)):
            train_step(epoch, step, sample)
        save_checkpoint(str(out / f"ckpt_{epoch}.bin"), epoch)
    log.finalize()
    elapsed = time.time() - t0

    s = summarize(out / "traces")
    if not a.quiet:
        print(f"traces: {out / 'traces'}")
        for f in s["files"]:
            print(f"  {f.name}  ({f.stat().st_size} bytes)")
        top = ", ".join(f"{n}={c}" for n, c in s["by_name"].most_common(6))
        io_top = ", ".join(f"{n}={c}" for n, c in s["io_by_name"].most_common(6))
        print(f"summary: {s['events'] + s['io_events']} events from {s['processes']} processes in {elapsed:.2f}s")
        print(f"  annotated functions: {s['events']}: {top}")
        print(f"  I/O calls (POSIX, STDIO): {s['io_events']}: {io_top or 'none'}")
        if s["counted"]:
            c = s["counted"]
            counted = ", ".join(f"{n}={k}" for n, k in c.most_common(6))
            print(f"  calls counted in ph 3 records, not written one by one: {sum(c.values())}: {counted}")
    expected = a.epochs * (2 * a.samples + 1) + 2 * a.epochs
    if os.environ.get("DFTRACER_ENABLE") == "1" and s["events"] != expected:
        print(f"error: expected {expected} annotated events, found {s['events']}", file=sys.stderr)
        return 1
    if os.environ.get("DFTRACER_ENABLE") == "1" and s["io_by_name"]["read"] < a.samples * a.epochs:
        print(f"error: expected a traced read of each sample, found {s['io_by_name']['read']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
