"""What a traced call of a library layer costs next to a traced pread, in instructions per
call (callgrind, as benches/callgrind_check.py counts them: all threads, and the calling
thread until finalize): an H5Dread of a small hyperslab (h5py) and an MPI_File_read_at
(mpi4py, Debian's Open MPI as a singleton: no mpirun), next to os.pread, all from Python.

    python3 benches/preload/layer_cost.py --python .venv-test/bin/python [--record FILE]
    (h5py and mpi4py installed there; `make bench` writes benches/record/layer_cost.json)

Each figure is the difference between 2,000 and 12,000 calls (start-up cancels), traced minus
untraced: under LD_PRELOAD (target/release/libdftracer_preload.so) and bound in process
(initialize(data_dir=...)). The H5Dread reads 16 doubles at an offset of a 4,096-double
dataset through one low-level call (`DatasetID.read`: one H5Dread each), so libhdf5's sieve
buffer holds the data and no POSIX read happens under it: the figure is the HDF5 hook's own.
An MPI_File_read_at of 128 bytes is one pread in ROMIO/OMPIO, traced too (both layers are
what a user gets): `mpi_read_at_*` is the two events; `mpi_read_at_mpiio_only` is the same
run with DFTRACER_DISABLE_POSIX=1, the MPI-IO layer alone; `mpi_read_at_file_untraced` is the
control, tracing on and the file outside the data dir (no event: every hook forwards), whose
figure is no hook's work (glibc's malloc inside Open MPI's read path takes a longer path in a
process that started the tracer; RESULTS.md). The MPI-IO hook's own cost is `_mpiio_only`
minus `_file_untraced`. The calling thread's figure is the one to compare: Open MPI's
progress thread runs in "all threads" too.

Each loop runs in a function on its locals, as users write it: a loop at module level looks
its names up in the module's dict, whose layout differs between modes (the bound mode has
one more global, `d`), and that moved the H5Dread loop's own lookups by 20 to 40
instructions per call either way while the hook's inclusive cost was the same 269 in both
modes (RESULTS.md).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from callgrind_check import ROOT, clean_env, per_call  # noqa: E402

H5 = """
import os, sys
mode, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "bound":
    import dftracer.dftracer as d
    d.initialize(os.path.join(os.path.dirname(data), "h5.pfw"), data, -1)
import numpy as np, h5py
f = h5py.File(os.path.join(data, "d.h5"), "r")
ds = f["x"].id
fs = ds.get_space()
fs.select_hyperslab((100,), (16,))
ms = h5py.h5s.create_simple((16,))
buf = np.empty(16, dtype=np.float64)
t = h5py.h5t.NATIVE_DOUBLE
def loop(n, ds, ms, fs, buf, t):
    for _ in range(n):
        ds.read(ms, fs, buf, t)
loop(n, ds, ms, fs, buf, t)
f.close()
if mode == "bound":
    d.finalize()
"""

PREAD = """
import os, sys
mode, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "bound":
    import dftracer.dftracer as d
    d.initialize(os.path.join(os.path.dirname(data), "io.pfw"), data, -1)
fd = os.open(os.path.join(data, "f.bin"), os.O_RDONLY)
def loop(n, fd, pread):
    for _ in range(n):
        pread(fd, 128, 800)
loop(n, fd, os.pread)
os.close(fd)
"""


MPI = """
import os, sys
mode, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "bound":
    import dftracer.dftracer as d
    d.initialize(os.path.join(os.path.dirname(data), "mpi.pfw"), data, -1)
import numpy as np
from mpi4py import MPI
fh = MPI.File.Open(MPI.COMM_SELF, os.path.join(data, "f.bin"), MPI.MODE_RDONLY)
buf = np.empty(128, dtype=np.uint8)
def loop(n, fh, buf):
    for _ in range(n):
        fh.Read_at(800, buf)
loop(n, fh, buf)
fh.Close()
if mode == "bound":
    d.finalize()
"""


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--record", help="write the figures to this JSON file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        data = d / "data"
        data.mkdir()
        (data / "f.bin").write_bytes(os.urandom(1 << 16))
        subprocess.run([a.python, "-c", "import h5py, numpy as np, sys; "
                        "h5py.File(sys.argv[1], 'w').create_dataset('x', data=np.arange(4096.0))",
                        str(data / "d.h5")], check=True)
        so = ROOT / "target" / "release" / "libdftracer_preload.so"
        # No periodic flush: the h5py loop runs for seconds under valgrind, and the writer's
        # wake-ups every second (a member flushed each time) would make the all-thread
        # figure depend on how long the run took, not on the events (it moved from 900 to
        # 3,300 between runs). The writer still drains at half a ring and at finalize.
        # And numpy's OpenBLAS without its worker threads, whose spinning callgrind counts in
        # "all threads" (the untraced baseline moved as much as the traced run).
        quiet = dict(DFTRACER_FLUSH_INTERVAL_MS="3600000", OPENBLAS_NUM_THREADS="1")
        pre = dict(LD_PRELOAD=str(so), DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD",
                   DFTRACER_DATA_DIR=str(data), DFTRACER_LOG_FILE=str(d / "p"), **quiet)
        bound = dict(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(d / "b"), **quiet)
        # mpi4py's wheel: its Open MPI build (Debian's libmpi.so.40), a singleton.
        mpi = dict(MPI4PY_MPIABI="openmpi", OMPI_MCA_rmaps_base_oversubscribe="1")
        res = {}
        cases = [("h5dread", H5, {}), ("mpi_read_at", MPI, mpi), ("pread", PREAD, {})]
        probe = subprocess.run([a.python, "-c", "from mpi4py import MPI"], capture_output=True,
                               env=clean_env(**mpi))
        if probe.returncode != 0:
            print("mpi_read_at: skipped, mpi4py with Open MPI cannot be imported (pip install mpi4py;"
                  " apt-get install openmpi-bin): " + probe.stderr.decode().strip()[-200:])
            cases.pop(1)
        for name, code, extra in cases:
            script = d / f"{name}.py"
            script.write_text(code)
            run = lambda mode: lambda n: [a.python, str(script), mode, str(data), str(n)]
            base = per_call(run("off"), clean_env(OPENBLAS_NUM_THREADS="1", **extra))
            res[f"{name}_preload"] = per_call(run("preload"), clean_env(**pre, **extra)) - base
            res[f"{name}_bound"] = per_call(run("bound"), clean_env(**bound, **extra)) - base
            if name == "mpi_read_at":
                only = dict(pre, DFTRACER_DISABLE_POSIX="1")
                res[f"{name}_mpiio_only"] = per_call(run("preload"), clean_env(**only, **extra)) - base
                # The control: tracing on, the file not traced (every hook forwards at once).
                # What it adds is not the hooks' (OMPIO's mallocs, RESULTS.md).
                (d / "elsewhere").mkdir()
                other = dict(only, DFTRACER_DATA_DIR=str(d / "elsewhere"))
                res[f"{name}_file_untraced"] = per_call(run("preload"), clean_env(**other, **extra)) - base
    for k, v in res.items():
        print(f"{k}: {v.total:.1f} instructions/call in all threads, {v.caller:.1f} on the calling thread")
    if "mpi_read_at_mpiio_only" in res:
        own = res["mpi_read_at_mpiio_only"] - res["mpi_read_at_file_untraced"]
        res["mpi_read_at_hook_own"] = own
        print(f"mpi_read_at_hook_own (mpiio_only - file_untraced): {own.total:.1f} in all threads, "
              f"{own.caller:.1f} on the calling thread")
    if a.record:
        rec = {
            "command": "python3 benches/preload/layer_cost.py --python PY --record FILE",
            "what": "callgrind instructions per call added by tracing (traced minus untraced)",
            "machine": f"{os.cpu_count()} cores, {cpu_model()}, {platform.release()}",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "all_threads": {k: round(v.total, 1) for k, v in res.items()},
            "calling_thread": {k: round(v.caller, 1) for k, v in res.items()},
        }
        Path(a.record).write_text(json.dumps(rec, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
