"""Smoke test of an installed dftracer-rs wheel (run by scripts/dist.sh with each fresh venv's
Python, outside the source tree): the import, a decorated function traced and read back, the
native files `python -m dftracer ...` names (all three library names, one SONAME), the
`dftracer` tool on the trace, and the preload library under LD_PRELOAD.

    python tests/dist_smoke.py        (prints `dist smoke: N passed, 0 failed` or raises)
"""

import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

SONAME = "libdftracer_core.so.4.3.0"
checks = 0


def ok(cond, what):
    global checks
    if not cond:
        raise SystemExit(f"dist smoke FAILED: {what}")
    checks += 1


def records(pattern):
    out = []
    for f in glob.glob(pattern):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                line = line.strip().rstrip(",")
                if line.startswith("{"):
                    out.append(json.loads(line))
    return out


def soname(path):
    """DT_SONAME of an ELF file, read with the standard library (no readelf needed)."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    ok(data[:4] == b"\x7fELF" and data[4] == 2, f"{path} is a 64-bit ELF")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, typ, _fl, _addr, off, size, link, _info, _al, entsize in sections:
        if typ != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link]
        for i in range(0, size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, off + i)
            if tag == 14:  # DT_SONAME
                start = strtab[4] + val
                return data[start:data.index(b"\0", start)].decode()
    return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    # The installed package, not a source tree next to this file.
    sys.path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    work = tempfile.mkdtemp(prefix="dft-dist-smoke-")
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1")
    env.pop("LD_PRELOAD", None)
    py = sys.executable

    # 1. import + a decorated function, traced, read back.
    prog = (
        "import dftracer, dftracer.dftracer as native, sys\n"
        "from dftracer.python import dftracer as T, dft_fn\n"
        "log = T.initialize_log(logfile=sys.argv[1], data_dir=None, process_id=-1)\n"
        "df = dft_fn('smoke')\n"
        "@df.log\n"
        "def step(x, step): return x + 1\n"
        "for i in range(3): step(i, i)\n"
        "log.finalize()\n"
        "print(dftracer.__version__, native.__file__)\n"
    )
    r = subprocess.run([py, "-c", prog, os.path.join(work, "run.pfw")], env=env, cwd=work,
                       capture_output=True, text=True)
    ok(r.returncode == 0, f"traced program: {r.stderr}")
    print("imported:", r.stdout.strip())
    ok("site-packages" in r.stdout, f"the installed module was imported ({r.stdout.strip()})")
    evs = [e for e in records(os.path.join(work, "run*.pfw.gz")) if e.get("name") == "step"]
    ok(len(evs) == 3, f"3 'step' events in the trace, found {len(evs)}")
    ok(all(e.get("cat") == "smoke" for e in evs), "events in category smoke")

    # 2. The native files, where `python -m dftracer` says.
    def where(what):
        out = subprocess.run([py, "-m", "dftracer", what], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    libdir = where("libdir")
    for name in ("libdftracer_core.so", SONAME, "libdftracer_preload.so"):
        f = os.path.join(libdir, name)
        ok(os.path.isfile(f), f"{f} exists")
        ok(soname(f) == SONAME, f"{name} has SONAME {SONAME} (has {soname(f)})")
    ok(where("preload") == os.path.join(libdir, "libdftracer_preload.so"), "preload path")
    ok(where("lib") == os.path.join(libdir, "libdftracer_core.so"), "lib path")
    ok(os.path.isfile(os.path.join(where("include"), "dftracer", "dftracer.h")), "dftracer/dftracer.h")
    ok(os.path.isfile(os.path.join(where("pkgconfig"), "dftracer.pc")), "dftracer.pc")
    ok(os.path.isfile(os.path.join(where("cmake"), "dftracer-config.cmake")), "dftracer-config.cmake")

    # 3. The `dftracer` tool (console script) reads the trace.
    tool = os.path.join(os.path.dirname(py), "dftracer")
    r = subprocess.run([tool, "validate", work], capture_output=True, text=True)
    ok(r.returncode == 0, f"dftracer validate: {r.stdout}{r.stderr}")

    # 4. LD_PRELOAD=$(python -m dftracer preload): a plain program's reads in DATA_DIR traced.
    data = os.path.join(work, "data")
    os.makedirs(data)
    with open(os.path.join(data, "f.bin"), "wb") as f:
        f.write(b"x" * 4096)
    penv = dict(env, LD_PRELOAD=where("preload"), DFTRACER_LOG_FILE=os.path.join(work, "pre"),
                DFTRACER_DATA_DIR=data, DFTRACER_INIT="PRELOAD")
    r = subprocess.run(["cat", os.path.join(data, "f.bin")], env=penv, capture_output=True)
    ok(r.returncode == 0 and len(r.stdout) == 4096, f"cat under LD_PRELOAD: {r.stderr!r}")
    io = [e for e in records(os.path.join(work, "pre*.pfw.gz")) if e.get("cat") == "POSIX"]
    names = {e.get("name") for e in io}
    ok("read" in names, f"POSIX read events under LD_PRELOAD: {sorted(names)}")
    print(f"dist smoke: {checks} passed, 0 failed ({sys.version.split()[0]}, {sys.executable})")


if __name__ == "__main__":
    main()
