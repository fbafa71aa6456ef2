"""I/O tracing from the Python API alone (no LD_PRELOAD): `initialize_log(data_dir=...)` binds
the process's POSIX and stdio calls in process (GOT rewriting in the native library), for the
interpreter, extension modules loaded before tracing started and libraries loaded after it."""

import shutil
import subprocess

import pytest


def io_events(r, name_prefix=None):
    ev = [e for e in r.events() if e["type"] == 3]
    if name_prefix:
        ev = [e for e in ev if e["name"].startswith(name_prefix)]
    return ev


def files_by_hash(r):
    return {x["args"]["value"]: x["args"]["name"] for x in r.records() if x.get("name") == "FH"}


def on(r, path, events):
    fh = files_by_hash(r)
    return [e for e in events if fh.get(e.get("args", {}).get("fhash")) == str(path)]


def end_record(r):
    (end,) = [x for x in r.records() if x.get("name") == "end"]
    return end


def test_interpreter_io_is_traced_with_exact_counts(run, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    f = data / "f.bin"
    f.write_bytes(b"x" * 4096)
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=os.environ["OUT"] + "/run.pfw", data_dir=os.environ["DATA"], process_id=-1)
        p = os.environ["DATA"] + "/f.bin"
        for _ in range(3):
            with open(p, "rb") as fh:
                assert len(fh.read()) == 4096
        fd = os.open(p, os.O_RDONLY)
        for i in range(5):
            assert os.pread(fd, 16, i) == b"x" * 16
        os.close(fd)
        os.stat(p)
        os.stat(p)
        assert os.listdir(os.environ["DATA"]) == ["f.bin"]
        log.finalize()
        """,
        env={"DATA": str(data)},
    )
    (trace,) = r.files()
    assert trace.name.endswith("-app.pfw.gz")
    io = io_events(r)
    opens = on(r, f, [e for e in io if e["name"].startswith("open")])
    assert len(opens) == 4, [e["name"] for e in io]
    preads = on(r, f, [e for e in io if e["name"].startswith("pread")])
    assert len(preads) == 5
    assert all(e["args"]["ret"] == 16 for e in preads)
    closes = on(r, f, [e for e in io if e["name"] == "close"])
    assert len(closes) == 4
    stats = [e for e in io if "stat" in e["name"] and e.get("args", {}).get("fhash")]
    assert len(on(r, f, stats)) >= 2
    assert end_record(r)["args"]["cfg"]["bind"] == 1


def test_library_loaded_after_initialize_is_traced(run, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    data = tmp_path / "data"
    data.mkdir()
    f = data / "g.txt"
    f.write_text("hello\n")
    src = tmp_path / "rd.c"
    src.write_text(
        """
        #include <fcntl.h>
        #include <unistd.h>
        int readfile(const char *p) {
            char b[64];
            int fd = open(p, O_RDONLY);
            if (fd < 0) return -1;
            int n = (int)read(fd, b, sizeof b);
            close(fd);
            return n;
        }
        """
    )
    lib = tmp_path / "librd.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    r = run(
        """
        import ctypes, os
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/run.pfw", os.environ["DATA"], -1)
        lib = ctypes.CDLL(os.environ["LIB"])
        lib.readfile.argtypes = [ctypes.c_char_p]
        for _ in range(4):
            assert lib.readfile((os.environ["DATA"] + "/g.txt").encode()) == 6
        d.finalize()
        """,
        env={"DATA": str(data), "LIB": str(lib)},
    )
    io = on(r, f, io_events(r))
    names = [e["name"] for e in io]
    assert names.count("read") == 4, names
    assert len([n for n in names if n.startswith("open")]) == 4, names
    assert names.count("close") == 4, names


def test_eight_threads_reading_exact_count(run, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.bin").write_bytes(b"y" * 1024)
    r = run(
        """
        import os, threading
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/run.pfw", os.environ["DATA"], -1)
        fd = os.open(os.environ["DATA"] + "/t.bin", os.O_RDONLY)
        def work():
            for i in range(200):
                assert os.pread(fd, 8, i) == b"y" * 8
        ts = [threading.Thread(target=work) for _ in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        os.close(fd)
        d.finalize()
        """,
        env={"DATA": str(data)},
    )
    preads = [e for e in io_events(r) if e["name"].startswith("pread")]
    assert len(preads) == 1600
    assert len({e["tid"] for e in preads}) == 8


def test_numpy_save_and_load_are_traced(run, tmp_path):
    pytest.importorskip("numpy")
    data = tmp_path / "data"
    data.mkdir()
    r = run(
        """
        import os
        import numpy as np   # its extension modules are loaded before tracing starts
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/run.pfw", os.environ["DATA"], -1)
        p = os.environ["DATA"] + "/a.npy"
        np.save(p, np.arange(100000, dtype=np.int64))
        assert np.load(p).sum() == 4999950000
        raw = os.environ["DATA"] + "/a.raw"
        np.arange(1000, dtype=np.float64).tofile(raw)       # numpy's own C code writes
        assert np.fromfile(raw).shape == (1000,)            # and reads it
        d.finalize()
        """,
        env={"DATA": str(data)},
    )
    io = io_events(r)
    npy = on(r, data / "a.npy", io)
    names = [e["name"] for e in npy]
    # The header through Python's file object (write), the array through numpy's C code on a
    # dup'ed fd (fdopen + fwrite, fread): every byte of the file, once.
    assert "fdopen" in names and "fwrite" in names and "fread" in names, names
    written = sum(e["args"]["ret"] for e in npy if e["name"] == "write")
    written += sum(e["args"]["ret"] * e["args"]["size"] for e in npy if e["name"] == "fwrite")
    assert written == (data / "a.npy").stat().st_size
    raw = on(r, data / "a.raw", io)
    assert raw, "numpy's C code (loaded before initialize) is traced"


def test_no_data_dir_means_no_binding_and_no_io_events(run, tmp_path):
    r = run(
        """
        import os
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/run.pfw", None, -1)
        with open(__file__) as f:
            f.read()
        d.log_event("x", "c", d.get_time(), 1)
        d.finalize()
        """
    )
    assert io_events(r) == []
    assert end_record(r)["args"]["cfg"]["bind"] == 0


def test_the_wheel_carries_the_native_library_and_says_where(tmp_path):
    import sys

    def ask(what):
        return subprocess.run(
            [sys.executable, "-m", "dftracer", what], capture_output=True, text=True, check=True
        ).stdout.strip()

    pre, lib, inc, pc = ask("preload"), ask("lib"), ask("include"), ask("pkgconfig")
    import os

    assert os.path.isfile(pre) and os.path.isfile(lib)
    assert os.path.isfile(os.path.join(inc, "dftracer", "dftracer.h"))
    assert os.path.isfile(os.path.join(pc, "dftracer.pc"))
    assert ask("version")
    # The preload name works as LD_PRELOAD for a plain program.
    data = tmp_path / "data"
    data.mkdir()
    (data / "x").write_text("x\n")
    out = tmp_path / "o"
    env = {
        "PATH": os.environ["PATH"],
        "LD_PRELOAD": pre,
        "DFTRACER_ENABLE": "1",
        "DFTRACER_INIT": "PRELOAD",
        "DFTRACER_DATA_DIR": str(data),
        "DFTRACER_LOG_FILE": str(out / "t"),
    }
    subprocess.run(["cat", str(data / "x")], env=env, check=True, capture_output=True)
    (trace,) = list(out.glob("t-*-preload.pfw.gz"))
    import gzip
    import json

    names = [json.loads(line)["name"] for line in gzip.open(trace, "rt")]
    assert "end" in names and any(n.startswith("open") for n in names), names
    # A C program against the header and library of the wheel.
    if shutil.which("gcc"):
        src = tmp_path / "c.c"
        src.write_text(
            '#include <stddef.h>\n#include <dftracer/dftracer.h>\nint main(void){DFTRACER_C_INIT(NULL,NULL,NULL);'
            "DFTRACER_C_FUNCTION_START();DFTRACER_C_FUNCTION_END();DFTRACER_C_FINI();return 0;}\n"
        )
        exe = tmp_path / "c"
        subprocess.run(
            ["gcc", str(src), "-I", inc, "-L", ask("libdir"), "-ldftracer_core", "-Wl,-rpath," + ask("libdir"), "-o", str(exe)],
            check=True,
        )
        env2 = dict(env)
        del env2["LD_PRELOAD"]
        env2["DFTRACER_LOG_FILE"] = str(tmp_path / "c-out" / "t")
        subprocess.run([str(exe)], env=env2, check=True)
        (ct,) = list((tmp_path / "c-out").glob("t-*-app.pfw.gz"))
        names = [json.loads(line)["name"] for line in gzip.open(ct, "rt")]
        assert "main" in names, names


def test_data_dir_binds_when_a_decorator_was_made_before_initialize_log(run, tmp_path):
    # The usual layout of a training script: a module with `@df.log` on its Dataset is imported
    # before main() calls initialize_log(data_dir=...). Making the decorator starts the tracer
    # from the environment (events before initialize_log are kept); the later initialize_log
    # must still bind I/O under its data dir. KNOWN BUG (found by the torch step): the
    # implicit start's branch of `initialize` (core/src/start.rs, `LazyStart::initialize`)
    # only retargets the log file and drops `data_dirs`, so no I/O event is recorded, in this
    # process and in its forked workers, and spawned workers get no DFTRACER_DATA_DIR.
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.bin").write_bytes(b"x" * 64)
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        df = dft_fn("data")

        @df.log
        def load(path):
            fd = os.open(path, os.O_RDONLY)
            os.read(fd, 64)
            os.close(fd)

        log = dftracer.initialize_log(logfile=None, data_dir=os.environ["DATA"], process_id=-1)
        load(os.environ["DATA"] + "/f.bin")
        log.finalize()
        """,
        env={"DATA": str(data)},
    )
    assert len(r.events("load")) == 1
    io = on(r, data / "f.bin", io_events(r))
    assert sorted(e["name"] for e in io if e["name"] in ("read", "close")) == ["close", "read"], [e["name"] for e in io_events(r)]
    assert end_record(r)["args"]["cfg"]["bind"] == 1
