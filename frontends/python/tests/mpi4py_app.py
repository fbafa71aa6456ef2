"""An mpi4py program for test_mpiio.py. argv: traced dir, untraced dir, out dir, when
("before": mpi4py imported before dftracer's initialize_log; "after": after it; "preload":
no initialize, the process is under LD_PRELOAD). Each rank does the same MPI-IO calls on
m.bin in each dir and writes <out>/ledger-<rank>.json: its pid and every call as [C name,
bytes asked] (null for a call that moves none), in order, both files."""

import json
import os
import sys

import numpy as np

data, other, out, when = sys.argv[1:5]
n = int(os.environ["N"])

if when == "before":
    from mpi4py import MPI
if when != "preload":
    from dftracer.python import dftracer

    log = dftracer.initialize_log(logfile=os.path.join(out, "run.pfw"), data_dir=data, process_id=-1)
if when != "before":
    from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
calls = []


def did(name, buf=None):
    calls.append(["MPI_File_" + name, None if buf is None else buf.nbytes])


def run(d):
    w = np.arange(rank * n, rank * n + n, dtype=np.float64)
    r = np.zeros(n, dtype=np.float64)
    bad = False
    fh = MPI.File.Open(comm, os.path.join(d, "m.bin"), MPI.MODE_CREATE | MPI.MODE_RDWR)
    did("open")
    mine, second = rank * n * 8, (size * n + rank * n) * 8
    fh.Write_at_all(mine, w)
    did("write_at_all", w)
    fh.Read_at_all(mine, r)
    did("read_at_all", r)
    bad |= not np.array_equal(r, w)
    fh.Iwrite_at(second, w).Wait()
    did("iwrite_at", w)
    fh.Sync()
    did("sync")
    r[:] = 0
    fh.Iread_at(second, r).Wait()
    did("iread_at", r)
    bad |= not np.array_equal(r, w)
    half = r[: n // 2]
    fh.Iread_at_all(mine, half).Wait()
    did("iread_at_all", half)
    fh.Write_at(second, w[: n // 4])
    did("write_at", w[: n // 4])
    fh.Read_at(second, half)
    did("read_at", half)
    # A view in doubles, then the shared file pointer: rank k's n doubles k-th, where
    # Write_at_all put the same values.
    fh.Set_view(0, MPI.DOUBLE, MPI.DOUBLE)
    did("set_view")
    fh.Write_ordered(w)
    did("write_ordered", w)
    fh.Seek_shared(0)
    did("seek_shared")
    r[:] = 0
    fh.Read_ordered(r)
    did("read_ordered", r)
    bad |= not np.array_equal(r, w)
    fh.Close()
    did("close")
    return bad


bad = run(data) | run(other)
with open(os.path.join(out, f"ledger-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "pid": os.getpid(), "calls": calls}, f)
print(f"rank {rank} {'FAILED' if bad else 'ok'}", flush=True)
if when != "preload":
    log.finalize()
