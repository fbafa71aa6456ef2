"""Short processes under the preload: what a traced process costs from start to exit.

Workflows and shell pipelines start many short processes, each of which gets its own tracer
(start, binding, its file, finalize). Each round runs N `cat`s of a 64 KiB file in the data dir
under each configuration, alternated: no preload, ours, the reference's (dftracer 2.2.0).
Reports the wall time per process (median of rounds) and the instructions one traced process
adds (callgrind, ours against no preload), and checks that every process of ours left its
trace with its reads.

    python3 benches/preload/short_procs.py --lib SO [--ref-lib SO] [--rounds 9] [--procs 40] [--record F]
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def env_for(lib, work):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    if lib:
        e.update(LD_PRELOAD=lib, DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD", DFTRACER_INC_METADATA="1",
                 DFTRACER_DATA_DIR=str(work / "data"), DFTRACER_LOG_FILE=str(work / "o" / "t"))
    return e


def run_procs(lib, work, n):
    shutil.rmtree(work / "o", ignore_errors=True)
    (work / "o").mkdir()
    e = env_for(lib, work)
    import time
    t = time.perf_counter()
    for _ in range(n):
        subprocess.run(["cat", str(work / "data" / "f")], stdout=subprocess.DEVNULL, env=e, check=True)
    return (time.perf_counter() - t) / n * 1000


def callgrind_total(lib, work):
    out = work / "cg.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "cat", str(work / "data" / "f")],
                   env=env_for(lib, work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError("no callgrind total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="our libdftracer_preload.so")
    ap.add_argument("--ref-lib", help="the reference's libdftracer_preload.so")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--procs", type=int, default=40)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--record")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    (work / "data").mkdir()
    (work / "data" / "f").write_bytes(os.urandom(64 * 1024))
    libs = {"off": None, "ours": a.lib}
    if a.ref_lib:
        libs["ref"] = a.ref_lib
    ms = {k: [] for k in libs}
    for _ in range(a.rounds):
        for k, lib in libs.items():
            ms[k].append(run_procs(lib, work, a.procs))
            if k == "ours":
                files = list((work / "o").iterdir())
                reads = 0
                for f in files:
                    with gzip.open(f, "rt") as fh:
                        reads += sum(1 for line in fh if '"name":"read","cat":"POSIX"' in line)
                if len(files) != a.procs or reads < 2 * a.procs:
                    print(f"short_procs: {len(files)} trace files with {reads} reads for {a.procs} processes")
                    return 1
    med = {k: statistics.median(v) for k, v in ms.items()}
    added = {k: v - med["off"] for k, v in med.items() if k != "off"}
    print("ms per short process (cat of 64 KiB, traced): " + ", ".join(f"{k}={v:.3f}" for k, v in med.items())
          + "; added: " + ", ".join(f"{k}=+{v:.3f}" for k, v in added.items()))
    rec = {"ms_per_process": med, "ms_added_per_process": added}
    if not a.no_callgrind:
        base = callgrind_total(None, work)
        ours = callgrind_total(a.lib, work)
        rec["instructions_added_per_process"] = {"ours": ours - base}
        print(f"instructions added per traced process (callgrind): ours {ours - base:,} (untraced cat: {base:,})")
    shutil.rmtree(work, ignore_errors=True)
    if a.record:
        rec["command"] = " ".join(sys.argv)
        Path(a.record).write_text(json.dumps(rec, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
