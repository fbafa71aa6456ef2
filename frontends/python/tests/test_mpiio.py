"""The MPI-IO layer with a real MPI: Debian's Open MPI (mpirun, libmpi.so.40), two ranks. The
program (mpiio_app.c, its calls are the ledger) writes and reads one file under the data dir
and one beside it; each rank's trace must hold exactly those MPI-IO calls on the traced file,
with the bytes each moved and the POSIX calls beneath, and nothing for the other file. Under
LD_PRELOAD (a program linked with libmpi) and in process (Python's initialize_log(data_dir=...),
then a library calling MPI-IO loaded with ctypes before or after it)."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"
LIBMPI = Path("/usr/lib/x86_64-linux-gnu/libmpi.so.40")
SRC = Path(__file__).with_name("mpiio_app.c")
N = 1000

pytestmark = pytest.mark.skipif(
    not (shutil.which("mpirun") and shutil.which("gcc") and LIBMPI.exists()),
    reason="needs Open MPI (Debian's openmpi-bin: mpirun, libmpi.so.40) and gcc",
)

# Per rank, on the traced file (mpiio_app.c's run()): call -> bytes of each.
LEDGER = {
    "MPI_File_open": [0],
    "MPI_File_write_at_all": [N * 8],
    "MPI_File_seek": [0, 0, 0],
    "MPI_File_write": [N * 8],
    "MPI_File_sync": [0],
    "MPI_File_read_at": [N * 8],
    "MPI_File_read": [N * 4],
    "MPI_File_read_all": [N * 8],
    "MPI_File_read_at_all": [N * 8],
    "MPI_File_set_size": [0],
    "MPI_File_close": [0],
}
SIZED = ("MPI_File_write_at_all", "MPI_File_write", "MPI_File_read_at", "MPI_File_read",
         "MPI_File_read_all", "MPI_File_read_at_all")


def mpirun(tmp_path, cmd, env):
    # The ranks get `env` (-x NAME=value), mpirun itself does not: it is not traced.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DFTRACER_", "OMPI_", "PMIX_"))}
    base.pop("LD_PRELOAD", None)
    xs = [a for k, v in env.items() for a in ("-x", f"{k}={v}")]
    proc = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", *xs, *cmd],
                          capture_output=True, text=True, env=base, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.split("\n")[:2]) == ["rank 0 ok", "rank 1 ok"], proc.stdout


def check(out, data, other, suffix):
    files = sorted(out.glob("*.pfw.gz"))
    assert len(files) == 2, files
    ranks = set()
    for f in files:
        assert f.name.endswith(suffix), f
        recs = [json.loads(l) for l in gzip.open(f, "rt")]
        fh = {r["args"]["value"]: r["args"]["name"] for r in recs if r.get("name") == "FH"}
        ev = [r for r in recs if r.get("ph") == 1]
        mpi = [e for e in ev if e["cat"] == "MPIIO"]
        assert all(e["type"] == 10 for e in mpi)
        assert {fh[e["args"]["fhash"]] for e in mpi} == {str(data / "m.bin")}
        assert Counter(e["name"] for e in mpi) == Counter({k: len(v) for k, v in LEDGER.items()})
        for call in SIZED:
            assert [e["args"]["size"] for e in mpi if e["name"] == call] == LEDGER[call], call
        assert all(e["args"]["ret"] == 0 for e in mpi)
        m = next(h for h, p in fh.items() if p == str(data / "m.bin"))
        posix = Counter(e["name"] for e in ev if e["cat"] == "POSIX" and e.get("args", {}).get("fhash") == m)
        assert any(n.startswith("pwrite") for n in posix) and any(n.startswith("pread") for n in posix), posix
        assert not [p for p in fh.values() if p.startswith(str(other))]
        (end,) = [r for r in recs if r.get("name") == "end"]
        ranks.add(end["args"]["app"].get("rank"))
    assert ranks == {0, 1}
    validate = os.environ.get("DFTRACER_VALIDATE")
    if validate:
        proc = subprocess.run([validate, "--files", *map(str, files)], capture_output=True, text=True, timeout=300)
        summary = [l for l in proc.stdout.splitlines() if l.startswith("Validated")]
        assert proc.returncode == 0 and summary and " 0 failed" in summary[-1], proc.stdout + proc.stderr


def dirs(tmp_path):
    data, other, out = tmp_path / "data", tmp_path / "other", tmp_path / "out"
    for d in (data, other, out):
        d.mkdir()
    return data, other, out


def test_mpiio_linked_program_under_preload(tmp_path):
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    data, other, out = dirs(tmp_path)
    exe = tmp_path / "app"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC), str(LIBMPI)], check=True)
    env = {"LD_PRELOAD": str(PRELOAD), "DFTRACER_ENABLE": "1", "DFTRACER_INIT": "PRELOAD",
           "DFTRACER_DATA_DIR": str(data), "DFTRACER_LOG_FILE": str(out / "trace")}
    mpirun(tmp_path, [str(exe), str(data), str(other), str(N)], env)
    check(out, data, other, "-preload.pfw.gz")


PY = """
import ctypes, os, sys
data, other, out, lib, when = sys.argv[1:6]
def load():
    return ctypes.CDLL(lib)
if when == "before":
    app = load()
from dftracer.python import dftracer
log = dftracer.initialize_log(logfile=os.path.join(out, "run.pfw"), data_dir=data, process_id=-1)
if when == "after":
    app = load()
argv = (ctypes.c_char_p * 5)(b"app", data.encode(), other.encode(), b"%d", None)
argv[3] = str(int(os.environ["N"])).encode()
sys.stdout.flush()
rc = app.app_main(4, argv)
log.finalize()
sys.exit(rc)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_mpiio_in_process(tmp_path, when):
    data, other, out = dirs(tmp_path)
    lib = tmp_path / "libapp.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-DAPP_MAIN=app_main", "-o", str(lib), str(SRC),
                    str(LIBMPI)], check=True)
    script = tmp_path / "main.py"
    script.write_text(PY)
    env = {"DFTRACER_ENABLE": "1", "N": str(N)}
    mpirun(tmp_path, [sys.executable, str(script), str(data), str(other), str(out), str(lib), when], env)
    check(out, data, other, "-app.pfw.gz")


def test_mpiio_disabled(tmp_path):
    """DFTRACER_DISABLE_MPIIO=1: no MPI-IO hook bound, the POSIX calls beneath still traced."""
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    data, other, out = dirs(tmp_path)
    exe = tmp_path / "app"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC), str(LIBMPI)], check=True)
    env = {"LD_PRELOAD": str(PRELOAD), "DFTRACER_ENABLE": "1", "DFTRACER_INIT": "PRELOAD",
           "DFTRACER_DATA_DIR": str(data), "DFTRACER_LOG_FILE": str(out / "trace"), "DFTRACER_DISABLE_MPIIO": "1"}
    mpirun(tmp_path, [str(exe), str(data), str(other), str(N)], env)
    files = sorted(out.glob("*.pfw.gz"))
    assert len(files) == 2
    for f in files:
        recs = [json.loads(l) for l in gzip.open(f, "rt")]
        assert not [r for r in recs if r.get("cat") == "MPIIO"]
        assert [r for r in recs if r.get("cat") == "POSIX" and r["name"].startswith("pwrite")]
        (end,) = [r for r in recs if r.get("name") == "end"]
        assert end["args"]["cfg"]["mpiio"] == 0
