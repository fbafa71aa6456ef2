"""Real `torch.utils.data.DataLoader` workers, traced: a Dataset whose `__getitem__` is
decorated with `@df.log` and reads one file under the data dir per item (I/O traced in
process by `initialize_log(data_dir=...)`), in every worker configuration a training job uses.

The oracle is independent of the tracer: every `__getitem__` call appends `pid idx` to a
ledger file outside the data dir (one `os.write` on an O_APPEND descriptor, so a worker the
loader kills would still leave its lines). For each process, the trace must hold exactly the
ledger's items as `Files.__getitem__` events (the index in `image_idx`) and exactly one
open, read and close of each item's file; every file is complete and self-contained, none
is empty, and dftracer-utils validates them."""

import collections
import os

import pytest

from conftest import self_contained, validate

N_ITEMS = 40
BATCH = 4
ITEM_BYTES = 3 * 16 * 16

DATASET = """
import os
import torch
from torch.utils.data import Dataset
from dftracer.python import dft_fn

df = dft_fn("data")


class Files(Dataset):
    def __init__(self, root, n, ledger):
        self.root, self.n, self.ledger = root, n, ledger

    def __len__(self):
        return self.n

    @df.log
    def __getitem__(self, image_idx):
        fd = os.open(os.path.join(self.root, f"img_{image_idx:04d}.bin"), os.O_RDONLY)
        raw = os.read(fd, 1 << 16)
        os.close(fd)
        led = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(led, f"{os.getpid()} {image_idx}\\n".encode())
        os.close(led)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).float().view(3, 16, 16)


def hang_at_exit(worker_id):
    # A non-daemon thread: the worker's exit (multiprocessing joins such threads) never
    # ends, so the loader's shutdown terminates it (SIGTERM) after its 5 s join timeout.
    import threading, time
    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
"""

MAIN = """
import os, sys
from torch.utils.data import DataLoader
from dftracer.python import dftracer, dft_fn
from ds import Files, hang_at_exit

train = dft_fn("train")


@train.log
def consume(batch, epoch, step):
    return float(batch.sum())


if __name__ == "__main__":
    ctx, workers, persistent, epochs, stop_after, hang = sys.argv[1:]
    workers, epochs, stop_after = int(workers), int(epochs), int(stop_after)
    log = dftracer.initialize_log(logfile=None, data_dir=os.environ["DATA"], process_id=-1)
    loader = DataLoader(
        Files(os.environ["DATA"], int(os.environ["N_ITEMS"]), os.environ["LEDGER"]),
        batch_size=int(os.environ["BATCH"]),
        num_workers=workers,
        multiprocessing_context=ctx,
        persistent_workers=persistent == "1",
        worker_init_fn=hang_at_exit if hang == "1" else None,
    )
    consumed = 0
    for epoch in range(epochs):
        it = iter(loader)
        for step, batch in enumerate(it):
            consume(batch, epoch, step)
            consumed += 1
            if stop_after and step + 1 == stop_after:
                break  # abandon the iterator mid-epoch
        if hang == "1":
            it._shutdown_workers()  # what the end of the epoch does; said here to see exit codes
            print("exitcodes", sorted(w.exitcode for w in it._workers))
        del it
    print("consumed", consumed)
    log.finalize()
"""


def make_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(N_ITEMS):
        (data / f"img_{i:04d}.bin").write_bytes(bytes((i + j) % 256 for j in range(ITEM_BYTES)))
    return data


def run_loader(run, tmp_path, ctx, workers, persistent, epochs, stop_after=0, hang=False):
    data = make_data(tmp_path)
    ledger = tmp_path / "ledger.txt"
    r = run(
        MAIN,
        env={"DATA": str(data), "LEDGER": str(ledger), "N_ITEMS": str(N_ITEMS), "BATCH": str(BATCH)},
        args=[ctx, str(workers), "1" if persistent else "0", str(epochs), str(stop_after), "1" if hang else "0"],
        module_files={"ds.py": DATASET},
        timeout=300,
    )
    calls = collections.Counter()
    for line in ledger.read_text().splitlines():
        pid, idx = line.split()
        calls[(int(pid), int(idx))] += 1
    return r, data, calls


def check(r, data, calls, main_batches):
    traces = r.traces()  # every line JSON, no empty file, last line terminated
    assert traces, "no trace file"
    validate(traces)
    per_pid = {}
    for path, recs in traces.items():
        self_contained(recs)
        events = [x for x in recs if x.get("ph") == 1 and x.get("cat") != "dftracer"]
        pids = {e["pid"] for e in events}
        assert len(pids) <= 1, (path, pids)
        if not events:
            continue
        (pid,) = pids
        assert pid not in per_pid, f"two files for pid {pid}"
        fh = {x["args"]["value"]: x["args"]["name"] for x in recs if x.get("name") == "FH"}
        per_pid[pid] = (events, fh)

    worker_pids = {pid for pid, _ in calls}
    assert worker_pids <= set(per_pid), f"workers without a trace: {worker_pids - set(per_pid)}"
    for pid in worker_pids:
        events, fh = per_pid[pid]
        want = collections.Counter(idx for p, idx in calls.elements() if p == pid)
        got = collections.Counter(
            e["args"]["image_idx"] for e in events if e["name"] == "Files.__getitem__" and e["cat"] == "data"
        )
        assert got == want, f"pid {pid}: __getitem__ events {sorted(got.elements())} != calls {sorted(want.elements())}"
        # One open, one read and one close of each item's file per call, in that process.
        for op in ("open", "read", "close"):
            io = collections.Counter()
            for e in events:
                if e["cat"] != "POSIX" or not (e["name"] == op or (op == "open" and e["name"].startswith("open"))):
                    continue
                path = fh.get(e.get("args", {}).get("fhash"), "")
                if path.startswith(str(data) + "/img_"):
                    io[int(path[-8:-4])] += 1
            assert io == want, f"pid {pid}: {op} events on item files {sorted(io.elements())} != {sorted(want.elements())}"
        reads = [e for e in events if e["cat"] == "POSIX" and e["name"] == "read" and fh.get(e["args"].get("fhash"), "").startswith(str(data))]
        assert all(e["args"]["ret"] == ITEM_BYTES for e in reads)
    main = [pid for pid, (events, _) in per_pid.items() if any(e["name"] == "consume" for e in events)]
    assert len(main) == 1, main
    consumed = [e for e in per_pid[main[0]][0] if e["name"] == "consume"]
    assert len(consumed) == main_batches
    return worker_pids


@pytest.mark.parametrize("ctx", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("workers,persistent", [(2, False), (4, True)])
def test_every_item_of_every_worker_is_traced(run, tmp_path, ctx, workers, persistent):
    epochs = 2
    r, data, calls = run_loader(run, tmp_path, ctx, workers, persistent, epochs)
    # Each epoch reads every item exactly once, spread over the workers.
    assert sum(calls.values()) == epochs * N_ITEMS
    assert sorted(idx for _, idx in calls.elements()) == sorted(list(range(N_ITEMS)) * epochs)
    pids = check(r, data, calls, main_batches=epochs * N_ITEMS // BATCH)
    # Non-persistent workers are new processes each epoch; persistent ones serve both.
    assert len(pids) == (workers if persistent else workers * epochs), pids


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_iterator_abandoned_mid_epoch(run, tmp_path, ctx):
    # 3 of 10 batches consumed, then the iterator is dropped: the workers had prefetched more
    # (prefetch_factor 2 per worker) and are shut down; whatever they read is in their traces.
    r, data, calls = run_loader(run, tmp_path, ctx, 2, False, 1, stop_after=3)
    assert 3 * BATCH <= sum(calls.values()) < N_ITEMS
    check(r, data, calls, main_batches=3)

