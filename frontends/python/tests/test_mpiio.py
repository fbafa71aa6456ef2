"""The MPI-IO layer with real MPIs: Debian's Open MPI (mpirun.openmpi, libmpi.so.40) and
MPICH (mpirun.mpich, libmpich.so.12), two ranks each. A program writes and reads one file
under the data dir and one beside it; each rank's trace must hold exactly its MPI-IO calls on
the traced file (the ledger), with the bytes each moved, its rank, the POSIX calls beneath,
and nothing for the other file. Programs: mpiio_app.c (its calls are LEDGER below), under
LD_PRELOAD (linked with libmpi) and in process (Python's initialize_log(data_dir=...), then a
library calling MPI-IO loaded with ctypes before or after it); and mpi4py_app.py, an mpi4py
program that writes its own ledger, with mpi4py imported before or after initialize, or
under LD_PRELOAD. A case whose MPI or mpi4py is missing is skipped, saying which."""

import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"
SRC = Path(__file__).with_name("mpiio_app.c")
APP_PY = Path(__file__).with_name("mpi4py_app.py")
N = 1000

# flavour -> (mpirun, libmpi, cflags, what to install)
MPIS = {
    "openmpi": ("mpirun.openmpi", "/usr/lib/x86_64-linux-gnu/libmpi.so.40", [], "openmpi-bin"),
    "mpich": ("mpirun.mpich", "/usr/lib/x86_64-linux-gnu/libmpich.so.12", ["-DMPICH_ABI"], "mpich"),
}
FLAVOURS = pytest.mark.parametrize("flavour", list(MPIS))

# Per rank, on the traced file (mpiio_app.c's run()): call -> bytes of each (None: no size).
LEDGER = {
    "MPI_File_open": [None],
    "MPI_File_write_at_all": [N * 8],
    "MPI_File_seek": [None] * 6,
    "MPI_File_write": [N * 8],
    "MPI_File_sync": [None] * 2,
    # The second is refused (count -1): no bytes; then N / 4 of a 2-double and of a 4-double
    # derived type.
    "MPI_File_read_at": [N * 8, 0, N * 4, N * 8],
    "MPI_File_read": [N * 4],
    "MPI_File_read_all": [N * 8],
    "MPI_File_read_at_all": [N * 8],
    "MPI_File_iwrite_at": [N * 8],
    "MPI_File_iread_at": [N * 8],
    "MPI_File_iread_at_all": [N * 2],
    "MPI_File_iread": [N * 8],
    "MPI_File_iwrite_all": [N * 4],
    "MPI_File_set_view": [None],
    "MPI_File_write_ordered": [N * 8],
    "MPI_File_seek_shared": [None],
    "MPI_File_read_ordered": [N * 8],
    "MPI_File_write_shared": [N * 2],
    "MPI_File_read_shared": [N * 2],
    "MPI_File_read_at_all_begin": [N * 8],
    "MPI_File_read_at_all_end": [None],
    "MPI_File_write_at_all_begin": [N * 8],
    "MPI_File_write_at_all_end": [None],
    "MPI_File_read_all_begin": [N * 4],
    "MPI_File_read_all_end": [None],
    "MPI_File_write_ordered_begin": [N * 2],
    "MPI_File_write_ordered_end": [None],
    "MPI_File_set_size": [None],
    "MPI_File_close": [None],
}


def need(flavour):
    mpirun, lib, _, pkg = MPIS[flavour]
    if not (shutil.which(mpirun) and shutil.which("gcc") and os.path.exists(lib)):
        pytest.skip(f"needs {flavour} (Debian's {pkg}: {mpirun}, {lib}) and gcc")


def mpirun(tmp_path, flavour, cmd, env):
    # The ranks get `env` (Open MPI: -x NAME=value; MPICH's hydra: -genv NAME value); mpirun
    # itself does not: it is not traced.
    drop = ("DFTRACER_", "OMPI_", "PMIX_", "PMI_", "HYDRA_", "MPI4PY_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    base.pop("LD_PRELOAD", None)
    if flavour == "openmpi":
        xs = ["--allow-run-as-root", "--oversubscribe"] + [a for k, v in env.items() for a in ("-x", f"{k}={v}")]
    else:
        xs = [a for k, v in env.items() for a in ("-genv", k, v)]
    proc = subprocess.run([MPIS[flavour][0], "-np", "2", *xs, *cmd],
                          capture_output=True, text=True, env=base, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # MPICH's hydra may join the two ranks' lines.
    assert sorted(re.findall(r"rank \d (?:ok|FAILED)", proc.stdout)) == ["rank 0 ok", "rank 1 ok"], proc.stdout + proc.stderr


def validate(files):
    tool = os.environ.get("DFTRACER_VALIDATE")
    if tool:
        proc = subprocess.run([tool, "--files", *map(str, files)], capture_output=True, text=True, timeout=300)
        summary = [l for l in proc.stdout.splitlines() if l.startswith("Validated")]
        assert proc.returncode == 0 and summary and " 0 failed" in summary[-1], proc.stdout + proc.stderr


def check(out, data, other, suffix, ledgers=None):
    """Each of the two traces against LEDGER (or, for mpi4py_app.py, `ledgers`: rank -> the
    [name, bytes] list that rank wrote, and the pid it ran as)."""
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
        (end,) = [r for r in recs if r.get("name") == "end"]
        rank = end["args"]["app"].get("rank")
        ranks.add(rank)
        if ledgers is None:
            ledger = LEDGER
        else:
            pid, calls = ledgers[rank]
            assert {e["pid"] for e in mpi} == {pid}, "the trace of another rank"
            ledger = {}
            for name, size in calls:
                ledger.setdefault(name, []).append(size)
        assert Counter(e["name"] for e in mpi) == Counter({k: len(v) for k, v in ledger.items()})
        for call, sizes in ledger.items():
            got = [e["args"].get("size") for e in sorted(mpi, key=lambda e: e["ts"]) if e["name"] == call]
            if call == "MPI_File_set_size":
                continue  # its `size` is the file's new size, not bytes moved
            assert got == sizes, call
        failed = [(e["name"], e["args"]["count"], e["args"]["size"]) for e in mpi if e["args"]["ret"] != 0]
        assert failed == ([] if ledgers is not None else [("MPI_File_read_at", -1, 0)]), failed
        assert [e["args"]["etype_size"] for e in mpi if e["name"] == "MPI_File_set_view"] == [8] * len(
            ledger.get("MPI_File_set_view", []))
        m = next(h for h, p in fh.items() if p == str(data / "m.bin"))
        posix = Counter(e["name"] for e in ev if e["cat"] == "POSIX" and e.get("args", {}).get("fhash") == m)
        assert any(n.startswith("pwrite") for n in posix) and any(n.startswith("pread") for n in posix), posix
        assert not [p for p in fh.values() if p.startswith(str(other))]
    assert ranks == {0, 1}
    validate(files)


def dirs(tmp_path):
    data, other, out = tmp_path / "data", tmp_path / "other", tmp_path / "out"
    for d in (data, other, out):
        d.mkdir()
    return data, other, out


def build(tmp_path, flavour, shared=False):
    _, lib, cflags, _ = MPIS[flavour]
    exe = tmp_path / ("libapp.so" if shared else "app")
    extra = ["-shared", "-fPIC", "-DAPP_MAIN=app_main"] if shared else []
    subprocess.run(["gcc", "-O1", *cflags, *extra, "-o", str(exe), str(SRC), lib], check=True)
    return exe


def preload_env(data, out, **extra):
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    return {"LD_PRELOAD": str(PRELOAD), "DFTRACER_ENABLE": "1", "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_DATA_DIR": str(data), "DFTRACER_LOG_FILE": str(out / "trace"), **extra}


@FLAVOURS
def test_mpiio_linked_program_under_preload(tmp_path, flavour):
    need(flavour)
    data, other, out = dirs(tmp_path)
    exe = build(tmp_path, flavour)
    mpirun(tmp_path, flavour, [str(exe), str(data), str(other), str(N)], preload_env(data, out))
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


@FLAVOURS
@pytest.mark.parametrize("when", ["before", "after"])
def test_mpiio_in_process(tmp_path, flavour, when):
    need(flavour)
    data, other, out = dirs(tmp_path)
    lib = build(tmp_path, flavour, shared=True)
    script = tmp_path / "main.py"
    script.write_text(PY)
    env = {"DFTRACER_ENABLE": "1", "N": str(N)}
    mpirun(tmp_path, flavour, [sys.executable, str(script), str(data), str(other), str(out), str(lib), when], env)
    check(out, data, other, "-app.pfw.gz")


@FLAVOURS
def test_mpiio_disabled(tmp_path, flavour):
    """DFTRACER_DISABLE_MPIIO=1: no MPI-IO hook bound, the POSIX calls beneath still traced."""
    need(flavour)
    data, other, out = dirs(tmp_path)
    exe = build(tmp_path, flavour)
    env = preload_env(data, out, DFTRACER_DISABLE_MPIIO="1")
    mpirun(tmp_path, flavour, [str(exe), str(data), str(other), str(N)], env)
    files = sorted(out.glob("*.pfw.gz"))
    assert len(files) == 2
    for f in files:
        recs = [json.loads(l) for l in gzip.open(f, "rt")]
        assert not [r for r in recs if r.get("cat") == "MPIIO"]
        assert [r for r in recs if r.get("cat") == "POSIX" and r["name"].startswith("pwrite")]
        (end,) = [r for r in recs if r.get("name") == "end"]
        assert end["args"]["cfg"]["mpiio"] == 0


# ------------------------------------------------------------------ mpi4py

def mpi4py_env(tmp_path, flavour):
    """What the ranks need for mpi4py's wheel to load this MPI. Its wheel holds a build per
    ABI, picked by MPI4PY_MPIABI; its MPICH build opens libmpi.so.12, which Debian names
    libmpich.so.12 (a directory with that one link, on LD_LIBRARY_PATH)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("needs mpi4py in this venv (scripts/test.sh's wheel step installs it)")
    if flavour == "openmpi":
        return {"MPI4PY_MPIABI": "openmpi"}
    d = tmp_path / "mpich-abi"
    d.mkdir()
    (d / "libmpi.so.12").symlink_to(MPIS["mpich"][1])
    return {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(d)}


def ledgers(out):
    """rank -> (pid, [[name, bytes], ...]) from the ledgers mpi4py_app.py wrote."""
    found = {}
    for p in glob.glob(str(out / "ledger-*.json")):
        x = json.loads(Path(p).read_text())
        found[x["rank"]] = (x["pid"], x["calls"])
    assert sorted(found) == [0, 1], found
    return found


@FLAVOURS
@pytest.mark.parametrize("when", ["before", "after", "preload"])
def test_mpi4py(tmp_path, flavour, when):
    """mpi4py imported before initialize (libmpi already loaded when the hooks bind), after it
    (mpi4py dlopens libmpi under tracing), or the whole interpreter under LD_PRELOAD."""
    need(flavour)
    env = mpi4py_env(tmp_path, flavour)
    data, other, out = dirs(tmp_path)
    env["N"] = str(N)
    if when == "preload":
        env.update(preload_env(data, out))
    else:
        env["DFTRACER_ENABLE"] = "1"
    mpirun(tmp_path, flavour, [sys.executable, str(APP_PY), str(data), str(other), str(out), when], env)
    led = ledgers(out)
    # The ledger holds what the program did on both files; the traced file's calls are the
    # first half (the same calls on the untraced file follow).
    for rank, (pid, calls) in led.items():
        assert len(calls) % 2 == 0 and calls[: len(calls) // 2] == calls[len(calls) // 2:], calls
        led[rank] = (pid, calls[: len(calls) // 2])
    check(out, data, other, "-preload.pfw.gz" if when == "preload" else "-app.pfw.gz", led)
