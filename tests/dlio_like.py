"""A DLIO-like training run, annotated as DLIO annotates its code (pydftracer's
`dftracer.python`: `initialize_log` in the main process and in every data-loader worker,
`@dft_fn(...).log` on the functions, `finalize`), run with whichever dftracer is installed
(ours, or the reference 2.2.0 + pydftracer 2.0.6):

    python tests/dlio_like.py DATA_DIR CKPT_DIR LOG_DIR

DATA_DIR holds the dataset (FILES sample files of SAMPLE bytes, made beforehand, untraced:
DLIO's generate_data is a run of its own). Two epochs of training, each with WORKERS
data-loader worker processes (PyTorch's DataLoader: worker k reads samples k, k+WORKERS,
...; each calls `initialize_log` first, as DLIO's worker_init does), 1 MiB per read call
(once every worker has started, they take their turns, one after the other: no two processes
read at once, and no worker's start-up, heavier under the reference, competes for the CPUs
with another's reads, which put multi-millisecond outliers into the reference's reads):
epoch 0's workers started with `fork`, epoch 1's with `spawn`. After each epoch the main
process reads every sample once (evaluation) and writes a checkpoint of CKPT bytes in 1 MiB
calls: the main process moves the most bytes, so dfanalyzer's POSIX time (per time window,
the busiest process's I/O time) is mostly the sum of its few hundred calls, not the slowest
of four workers.

Files are read and written through unbuffered `open(..., buffering=0)` (FileIO: one system
call per read or write), reads into one buffer allocated once (`readinto`, as numpy's
loaders read into their array): with a new 1 MiB `bytes` per `read`, the call's real length
follows the allocator's state (fresh pages faulted in by the kernel's copy), which each
tracer's own allocations change (1 MiB reads from the page cache, one process: ours 540 µs,
the reference's 228 µs, untraced 432 µs, each tracer's `dur` within 6 µs of Python's own
timing around the call).
"""

import multiprocessing as mp
import os
import sys

from dftracer.python import dft_fn, dftracer

MiB = 1 << 20
FILES = 64
SAMPLE = 2 * MiB
CKPT = 16 * MiB
WORKERS = 2

DATA, CKPT_DIR, LOG_DIR = sys.argv[1:4] if len(sys.argv) >= 4 else (None, None, None)

loader = dft_fn("data_loader")
ckpt = dft_fn("checkpoint")
train = dft_fn("train")


def log_path():
    return os.path.join(LOG_DIR, "trace.pfw")


def sample(i):
    return os.path.join(DATA, f"sample_{i:03d}.bin")


BUF = memoryview(bytearray(MiB))


@loader.log
def read_sample(i):
    n = 0
    with open(sample(i), "rb", buffering=0) as f:
        while True:
            k = f.readinto(BUF)
            if not k:
                break
            n += k
    return n


def worker_main(k, data, log_dir, ready, turns):
    global DATA, LOG_DIR
    DATA, LOG_DIR = data, log_dir
    log = dftracer.initialize_log(logfile=log_path(), data_dir=DATA, process_id=os.getpid())
    ready[k].set()
    turns[k].wait()
    for i in range(k, FILES, WORKERS):
        assert read_sample(i) == SAMPLE
    turns[k + 1].set()
    log.finalize()


@ckpt.log
def checkpoint(epoch):
    block = bytes([epoch]) * MiB
    with open(os.path.join(CKPT_DIR, f"ckpt_{epoch}.bin"), "wb", buffering=0) as f:
        for _ in range(CKPT // MiB):
            f.write(block)


@train.log
def epoch(e, method):
    ctx = mp.get_context(method)
    ready = [ctx.Event() for _ in range(WORKERS)]
    turns = [ctx.Event() for _ in range(WORKERS + 1)]
    workers = [
        ctx.Process(target=worker_main, args=(k, DATA, LOG_DIR, ready, turns)) for k in range(WORKERS)
    ]
    for w in workers:
        w.start()
    for r in ready:
        r.wait()
    turns[0].set()
    for w in workers:
        w.join()
        assert w.exitcode == 0, w.exitcode
    evaluate(e)
    checkpoint(e)


@train.log
def evaluate(e):
    # the evaluation pass, in the main process: every sample once
    for i in range(FILES):
        assert read_sample(i) == SAMPLE


def main():
    log = dftracer.initialize_log(
        logfile=log_path(), data_dir=f"{DATA}:{CKPT_DIR}", process_id=os.getpid()
    )
    epoch(0, "fork")
    epoch(1, "spawn")
    log.finalize()


if __name__ == "__main__":
    main()
