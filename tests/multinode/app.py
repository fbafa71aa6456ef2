"""The traced job of tests/multinode: an annotated program with POSIX I/O under the data dir.

Each process writes 16 * (rank + 1) blocks of 4 KiB (--blocks) to its own file under DFTRACER_DATA_DIR and reads
them back, in annotated steps, then writes what it did (the test's oracle) to
`<out>/did_<rank>_<host>_<pid>.json`. With --mpi it is an mpi4py program (rank from MPI, an
allreduce of the bytes); without, the rank is the launcher's (SLURM_PROCID). --seconds keeps
it stepping until then (or until a signal: the scancel test).

    python app.py --out DIR [--mpi] [--blocks N] [--seconds S]
"""
import argparse
import json
import os
import socket
import time

from dftracer.python import dft_fn, dftracer

BLOCK = 4096

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--mpi", action="store_true")
p.add_argument("--blocks", type=int, default=0, help="blocks per step (default: 16 per rank + 16)")
p.add_argument("--seconds", type=float, default=0.0)
a = p.parse_args()

if a.mpi:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
else:
    comm = None
    rank, size = int(os.environ.get("SLURM_PROCID", "0")), int(os.environ.get("SLURM_NTASKS", "1"))

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=rank)
df = dft_fn("app")
host, pid = socket.gethostname(), os.getpid()
data = os.environ["DFTRACER_DATA_DIR"]
os.makedirs(data, exist_ok=True)
path = os.path.join(data, f"rank{rank}_{host}_{pid}.bin")
blocks = a.blocks or 16 * (rank + 1)
did = {"rank": rank, "size": size, "host": host, "pid": pid, "path": path, "steps": 0,
       "writes": 0, "write_bytes": 0, "reads": 0, "read_bytes": 0}


@df.log
def step(n):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for _ in range(n):
        did["write_bytes"] += os.write(fd, b"x" * BLOCK)
        did["writes"] += 1
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    for _ in range(n):
        did["read_bytes"] += len(os.read(fd, BLOCK))
        did["reads"] += 1
    os.close(fd)
    did["steps"] += 1


deadline = time.time() + a.seconds
step(blocks)
while time.time() < deadline:
    step(blocks)
    time.sleep(0.05)
if comm is not None:
    with dft_fn("app", name="allreduce"):
        did["job_write_bytes"] = comm.allreduce(did["write_bytes"])
with open(os.path.join(a.out, f"did_{rank}_{host}_{pid}.json"), "w") as f:
    json.dump(did, f)
log.finalize()
