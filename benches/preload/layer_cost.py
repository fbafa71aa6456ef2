"""What a traced H5Dread of a small hyperslab costs, in instructions per call (callgrind, as
benches/callgrind_check.py counts them: all threads, and the calling thread until finalize),
next to a traced os.pread from Python measured the same way.

    python3 benches/preload/h5dread_cost.py --python .venv-test/bin/python   (h5py installed there)

Each figure is the difference between 2,000 and 12,000 calls (start-up cancels), traced minus
untraced: under LD_PRELOAD (target/release/libdftracer_preload.so) and bound in process
(initialize(data_dir=...)). The H5Dread reads 16 doubles at an offset of a 4,096-double
dataset through one low-level call (`DatasetID.read`: one H5Dread each), so libhdf5's sieve
buffer holds the data and no POSIX read happens under it: the figure is the HDF5 hook's own.
Not run by CI (h5py under valgrind takes minutes); results: benches/preload/RESULTS.md.
"""

import argparse
import os
import sys
import tempfile
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
for _ in range(n):
    ds.read(ms, fs, buf, t)
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
for _ in range(n):
    os.pread(fd, 128, 800)
os.close(fd)
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        data = d / "data"
        data.mkdir()
        (data / "f.bin").write_bytes(os.urandom(1 << 16))
        import subprocess

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
        res = {}
        for name, code in (("h5dread", H5), ("pread", PREAD)):
            script = d / f"{name}.py"
            script.write_text(code)
            run = lambda mode: lambda n: [a.python, str(script), mode, str(data), str(n)]
            base = per_call(run("off"), clean_env(OPENBLAS_NUM_THREADS="1"))
            res[f"{name}_preload"] = per_call(run("preload"), clean_env(**pre)) - base
            res[f"{name}_bound"] = per_call(run("bound"), clean_env(**bound)) - base
    for k, v in res.items():
        print(f"{k}: {v.total:.1f} instructions/call in all threads, {v.caller:.1f} on the calling thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
