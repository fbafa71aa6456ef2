"""The HDF5 layer with the real libraries: h5py (and its own libhdf5, loaded RTLD_LOCAL from
h5py.libs/) and numpy from PyPI. A program writes and reads datasets and attributes under the
data dir and beside it, and keeps a ledger of what it did; the trace must hold exactly the
ledger's HDF5 calls on the traced file, with the bytes each moved, the POSIX calls libhdf5
made underneath on the same file, and nothing for the file outside the data dir. Under
LD_PRELOAD and in process (initialize_log(data_dir=...)), with h5py imported before and after
the tracer started."""

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

h5py = pytest.importorskip("h5py", reason="h5py from PyPI (scripts/test.sh installs it into .venv-test)")

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"

# What the program does, with the calls each h5py operation makes (h5py 3.x: File(p, "w") is
# one H5Fcreate, File(p, "r") one H5Fopen, a dataset slice read or write one H5Dread or
# H5Dwrite, an attribute's write or read one H5Awrite or H5Aread).
PROGRAM = """
import json, os, sys
mode = os.environ["MODE"]
data, other, out = os.environ["DATA"], os.environ["OTHER"], os.environ["OUT"]
ledger = []
def note(call, size=0):
    ledger.append([call, int(size)])

early = None
if mode == "before":
    import numpy as np, h5py
    # A dataset opened before the tracer started, read after: its file is found from its id.
    early = h5py.File(os.path.join(data, "early.h5"), "r")["z"]
if mode in ("before", "after"):
    from dftracer.python import dftracer
    log = dftracer.initialize_log(logfile=out + "/run.pfw", data_dir=data, process_id=-1)
import numpy as np, h5py

def work(d, traced):
    rec = note if traced else (lambda call, size=0: None)
    p = os.path.join(d, "a.h5")
    big = np.arange(1 << 17, dtype=np.float64)          # 1 MiB: read back through pread
    with h5py.File(p, "w") as f:
        rec("H5Fcreate")
        f.create_dataset("x", data=np.arange(1000, dtype=np.float64))
        rec("H5Dcreate2"); rec("H5Dwrite", 8000)
        y = f.create_dataset("y", shape=big.shape, dtype=big.dtype)
        rec("H5Dcreate2")
        for i in range(4):
            part = big[i * (1 << 15):(i + 1) * (1 << 15)]
            y[i * (1 << 15):(i + 1) * (1 << 15)] = part
            rec("H5Dwrite", part.nbytes)
        g = f.create_group("g")
        rec("H5Gcreate2")
        k = np.arange(6, dtype=np.int32)
        g.attrs["k"] = k
        rec("H5Awrite", k.nbytes)
        f.flush()
        rec("H5Fflush")
    with h5py.File(p, "r") as f:
        rec("H5Fopen")
        x = f["x"]
        a = x[10:20]
        rec("H5Dread", a.nbytes)
        b = x[()]
        rec("H5Dread", b.nbytes)
        assert (b == np.arange(1000)).all()
        c = f["y"][()]
        rec("H5Dread", c.nbytes)
        assert (c == big).all()
        for s in range(0, 400, 100):
            h = f["y"][s:s + 7]
            rec("H5Dread", h.nbytes)
        k = f["g"].attrs["k"]
        rec("H5Aread", k.nbytes)
        assert list(k) == list(range(6))
    # Low level, one id reused with what changes its size (the cached sizes must follow):
    # a selection re-selected, a type resized, a dataset extended.
    with h5py.File(p, "r+") as f:
        rec("H5Fopen")
        ds = f["y"].id
        fs = ds.get_space()
        ms = h5py.h5s.create_simple((64,))
        buf = np.empty(64)
        for n in (8, 16, 3):
            fs.select_hyperslab((100,), (n,))
            ms.select_hyperslab((0,), (n,))
            ds.read(ms, fs, buf)
            rec("H5Dread", n * 8)
        # Again with nothing changed: the remembered bytes of the last transfer.
        for _ in range(2):
            ds.read(ms, fs, buf)
            rec("H5Dread", 3 * 8)
        s = f.create_dataset("s", data=np.array([b"abcdefgh"] * 5, dtype="S8"))
        rec("H5Dcreate2"); rec("H5Dwrite", 40)
        t = h5py.h5t.C_S1.copy()
        t.set_size(8)
        out = np.empty(5, dtype="S8")
        s.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, t)
        rec("H5Dread", 40)
        t.set_size(4)
        out = np.empty(5, dtype="S4")
        s.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, t)
        rec("H5Dread", 20)
        r = f.create_dataset("r", shape=(10,), maxshape=(None,), dtype=np.float64)
        rec("H5Dcreate2")
        r.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(10.0))
        rec("H5Dwrite", 80)
        r.resize((20,))
        r.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(20.0))
        rec("H5Dwrite", 160)

work(data, True)
work(other, False)
if early is not None:
    z = early[()]
    note("H5Dread", z.nbytes)
    early.file.close()
with open(os.path.join(out, "ledger.json"), "w") as fh:
    json.dump(ledger, fh)
if mode in ("before", "after"):
    log.finalize()
"""


def check(r, data, other):
    ledger = json.loads((Path(r.out) / "ledger.json").read_text())
    records = r.records()
    fh = {x["args"]["value"]: x["args"]["name"] for x in records if x.get("name") == "FH"}
    ev = [e for e in records if e.get("ph") == 1]
    hdf5 = [e for e in ev if e["cat"] == "HDF5"]
    assert hdf5, "no HDF5 event"
    assert all(e["type"] == 5 for e in hdf5)
    # Every HDF5 event names a file under the data dir, none the other one.
    paths = {fh[e["args"]["fhash"]] for e in hdf5}
    assert paths <= {str(data / "a.h5"), str(data / "early.h5")}, paths
    # Exact counts and bytes, per call named in the ledger.
    want = Counter(c for c, _ in ledger)
    got = Counter(e["name"] for e in hdf5 if e["name"] in want)
    assert got == want, (got, want)
    for call in ("H5Dread", "H5Dwrite", "H5Aread", "H5Awrite"):
        sizes = sorted(s for c, s in ledger if c == call)
        assert sorted(e["args"]["size"] for e in hdf5 if e["name"] == call) == sizes, call
        assert all(e["args"]["ret"] == 0 for e in hdf5 if e["name"] == call)
    # The calls that open objects name them.
    assert sorted(e["args"]["name"] for e in hdf5 if e["name"] == "H5Dcreate2") == ["r", "s", "x", "y"]
    assert [e["args"]["ret"] for e in hdf5 if e["name"] == "H5Dset_extent"] == [0]
    # POSIX underneath, on the same file: libhdf5's writes and reads, the 1 MiB dataset's
    # read inside its H5Dread.
    a = next(h for h, p in fh.items() if p == str(data / "a.h5"))
    posix = [e for e in ev if e["cat"] == "POSIX" and e.get("args", {}).get("fhash") == a]
    names = Counter(e["name"] for e in posix)
    assert any(n.startswith("pwrite") for n in names) and any(n.startswith("pread") for n in names), names
    big = [e for e in hdf5 if e["name"] == "H5Dread" and e["args"]["size"] == 1 << 20]
    assert len(big) == 1
    (big,) = big
    inside = [e for e in posix if e["name"].startswith("pread") and e["tid"] == big["tid"]
              and big["ts"] <= e["ts"] and e["ts"] + e["dur"] <= big["ts"] + big["dur"]]
    assert sum(e["args"]["ret"] for e in inside) >= 1 << 20, inside
    # Nothing for the file outside the data dir, in either layer.
    o = [h for h, p in fh.items() if p.startswith(str(other))]
    assert not [e for e in ev if e.get("args", {}).get("fhash") in o]
    validate = os.environ.get("DFTRACER_VALIDATE")
    if validate:
        proc = subprocess.run([validate, "--files", *map(str, r.files())], capture_output=True, text=True,
                              timeout=300)
        summary = [l for l in proc.stdout.splitlines() if l.startswith("Validated")]
        assert proc.returncode == 0 and summary and " 0 failed" in summary[-1], proc.stdout[-2000:] + proc.stderr[-2000:]


def setup(tmp_path):
    import numpy as np

    data, other = tmp_path / "data", tmp_path / "other"
    data.mkdir()
    other.mkdir()
    with h5py.File(data / "early.h5", "w") as f:
        f.create_dataset("z", data=np.arange(300, dtype=np.int64))
    return data, other


@pytest.mark.parametrize("mode", ["before", "after"])
def test_hdf5_in_process(run, tmp_path, mode):
    data, other = setup(tmp_path)
    r = run(PROGRAM, env={"MODE": mode, "DATA": str(data), "OTHER": str(other)})
    assert "DFTRACER WARN" not in r.stderr, r.stderr
    (trace,) = r.files()
    assert trace.name.endswith("-app.pfw.gz")
    check(r, data, other)
    if mode == "before":
        # The early dataset's read: found from its id (its open came before the tracer).
        fh = {x["args"]["value"]: x["args"]["name"] for x in r.records() if x.get("name") == "FH"}
        early = [e for e in r.events("H5Dread") if fh[e["args"]["fhash"]] == str(data / "early.h5")]
        assert [e["args"]["size"] for e in early] == [300 * 8]


def test_hdf5_under_preload(run, tmp_path):
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    data, other = setup(tmp_path)
    r = run(
        PROGRAM,
        env={
            "MODE": "preload",
            "DATA": str(data),
            "OTHER": str(other),
            "LD_PRELOAD": str(PRELOAD),
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_DATA_DIR": str(data),
        },
    )
    (trace,) = r.files()
    assert trace.name.endswith("-preload.pfw.gz")
    check(r, data, other)


def test_hdf5_disabled(run, tmp_path):
    data, other = setup(tmp_path)
    r = run(PROGRAM, env={"MODE": "after", "DATA": str(data), "OTHER": str(other), "DFTRACER_DISABLE_HDF5": "1"})
    assert not [e for e in r.events() if e["cat"] == "HDF5"]
    assert [e for e in r.events() if e["cat"] == "POSIX"], "POSIX events stay"
    (end,) = [x for x in r.records() if x.get("name") == "end"]
    assert end["args"]["cfg"]["hdf5"] == 0


def test_hdf5_linked_c_program_under_preload(tmp_path):
    """libhdf5 as a program's DT_NEEDED: loaded before the preloaded tracer's constructor,
    which binds the program's (lazy) slots; output and HDF5's own error report unchanged."""
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    libs = Path(h5py.__file__).resolve().parent.parent / "h5py.libs"
    (lib,) = libs.glob("libhdf5-*.so*")
    exe = tmp_path / "h5c"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(Path(__file__).with_name("hdf5_linked.c")),
                    str(lib), f"-Wl,-rpath,{libs}"], check=True)
    data = tmp_path / "data"
    data.mkdir()
    n = 5
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    plain = subprocess.run([str(exe), str(data), str(n)], capture_output=True, text=True, env=env, timeout=60)
    out = tmp_path / "out"
    traced = subprocess.run(
        [str(exe), str(data), str(n)], capture_output=True, text=True, timeout=60,
        env={**env, "LD_PRELOAD": str(PRELOAD), "DFTRACER_ENABLE": "1", "DFTRACER_INIT": "PRELOAD",
             "DFTRACER_DATA_DIR": str(data), "DFTRACER_LOG_FILE": str(out / "trace")},
    )
    assert plain.returncode == traced.returncode == 0, traced.stderr
    # The program's own bad call (H5Dread on id -5) prints HDF5's error stack: the same text.
    assert "H5Dread" in plain.stderr
    assert (traced.stdout, traced.stderr) == (plain.stdout, plain.stderr)
    import gzip

    (trace,) = out.glob("*.pfw.gz")
    recs = [json.loads(l) for l in gzip.open(trace, "rt")]
    hdf5 = [r for r in recs if r.get("ph") == 1 and r["cat"] == "HDF5"]
    assert Counter(e["name"] for e in hdf5) == Counter(
        {"H5Fcreate": 1, "H5Dcreate2": 1, "H5Dwrite": 1, "H5Dclose": 2, "H5Fclose": 2, "H5Fopen": 1,
         "H5Dopen2": 1, "H5Dread": n})
    # H5S_ALL both ways: the dataset's whole extent, 4,096 doubles.
    assert [e["args"]["size"] for e in hdf5 if e["name"] in ("H5Dread", "H5Dwrite")] == [32768] * (n + 1)
    fh = {r["args"]["value"]: r["args"]["name"] for r in recs if r.get("name") == "FH"}
    assert {fh[e["args"]["fhash"]] for e in hdf5} == {str(data / "c.h5")}


@pytest.mark.parametrize("explicit", [False, True])
def test_incomplete_libhdf5_is_left_alone(run, tmp_path, explicit):
    """An object that looks like a libhdf5 (defines H5Dread and H5Fget_name) but lacks the
    rest: nothing is bound for it, the program runs as untraced, and one stderr line says so
    only when DFTRACER_DISABLE_HDF5 was set explicitly."""
    assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "fake.c"
    src.write_text("int H5Dread(void) { return 7; }\nlong H5Fget_name(void) { return 0; }\n")
    lib = tmp_path / "libfakehdf5.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    data = tmp_path / "data"
    data.mkdir()
    env = {"LIB": str(lib), "LD_PRELOAD": str(PRELOAD), "DFTRACER_INIT": "PRELOAD", "DFTRACER_DATA_DIR": str(data)}
    if explicit:
        env["DFTRACER_DISABLE_HDF5"] = "0"
    r = run(
        """
        import ctypes, os
        lib = ctypes.CDLL(os.environ["LIB"])
        assert lib.H5Dread() == 7
        """,
        env=env,
    )
    lines = [l for l in r.stderr.splitlines() if "HDF5" in l]
    if explicit:
        assert len(lines) == 1 and "cannot be traced" in lines[0] and "missing" in lines[0], r.stderr
    else:
        assert lines == [], r.stderr
    assert not [e for e in r.events() if e["cat"] == "HDF5"]
