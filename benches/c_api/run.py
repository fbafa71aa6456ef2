#!/usr/bin/env python3
"""What one annotated C/C++ region costs: ours against the reference (dftracer 2.2.0) and
against the same function without annotations, in the same run.

    benches/c_api/run.py --lib target/release/libdftracer_preload.so --ref-venv .venv-ref \
        [--rounds 5] [--calls 2000000] [--burst 10000] [--record benches/record/c_api.json]

bench.c is built four times: as C against our header and library, as C++ against ours, and
as C against the reference wheel's header and library (the reference's C++ header includes
cpp-logger's, which its wheel does not ship: no C++ build of the reference). Each case runs in
its own process, configurations alternating round by round; figures are medians in ns per
call: wall time of the calling thread's loop, its CPU time, and the process's CPU time with
DFTRACER_C_FINI included (every thread: the writer's encoding and compression). "Added" is
the case minus `plain` (the same loop calling the same function without annotations).

Two ways of calling, each a table: back to back ("sustained": the writer cannot keep up with
tens of millions of regions a second, so the calling thread ends up encoding part of its own
ring, and the figure is bounded by the writer's cost per event), and in bursts of --burst calls
5 ms apart ("bursts": the writer drains between them, as in a code whose regions are not back to
back; the pauses are not timed): what a region costs its own thread.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
C_CASES = ["plain", "fn", "region", "fn_2int"]
CPP_CASES = ["cpp_fn", "cpp_fn_2int"]


def build(cc, lang, inc, libdir, out, extra_link=()):
    cmd = [cc, "-O2", "-Wall", "-Wextra", "-x", lang, f"-I{inc}", "-o", out,
           os.path.join(HERE, "bench.c"), f"-L{libdir}", "-ldftracer_core",
           f"-Wl,-rpath,{libdir}", *extra_link]
    subprocess.run(cmd, check=True)


def run(exe, case, calls, env, burst=0):
    args = [exe, case, str(calls)] + ([str(burst)] if burst else [])
    out = subprocess.run(args, env=env, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    f = out.split()
    return float(f[2]), float(f[3]), float(f[4])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="our libdftracer_preload.so (release)")
    ap.add_argument("--ref-venv", help="venv with dftracer==2.2.0 (omit: no reference)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--burst", type=int, default=10_000,
                    help="calls per burst in the bursts table (0: no bursts table)")
    ap.add_argument("--record", help="write the medians here (JSON)")
    a = ap.parse_args()
    if a.rounds < 1 or a.calls < 1:
        sys.exit("run.py: --rounds and --calls must be positive")
    if a.burst < 0:
        sys.exit("run.py: --burst must be 0 or positive")
    if not os.path.isfile(a.lib):
        sys.exit(f"run.py: --lib {a.lib}: no such file")
    work = tempfile.mkdtemp(prefix="dft-capi-bench-")
    try:
        ours_lib = os.path.join(work, "ours-lib")
        os.mkdir(ours_lib)
        for n in ("libdftracer_core.so", "libdftracer_core.so.4.3.0"):
            os.symlink(os.path.abspath(a.lib), os.path.join(ours_lib, n))
        inc = os.path.join(ROOT, "frontends/preload/include")
        exes = {}
        exes["ours"] = os.path.join(work, "ours")
        build("gcc", "c", inc, ours_lib, exes["ours"])
        exes["ours-cpp"] = os.path.join(work, "ours-cpp")
        build("g++", "c++", inc, ours_lib, exes["ours-cpp"])
        if a.ref_venv:
            site = glob.glob(os.path.join(a.ref_venv, "lib/python3*/site-packages"))
            if not site or not os.path.isdir(os.path.join(site[0], "dftracer/lib64")):
                sys.exit(f"run.py: --ref-venv {a.ref_venv}: no dftracer 2.2.0 installed there")
            d = os.path.join(site[0], "dftracer")
            exes["ref"] = os.path.join(work, "ref")
            build("gcc", "c", os.path.join(d, "include"), os.path.join(d, "lib64"), exes["ref"],
                  [f"-Wl,-rpath-link,{os.path.join(site[0], 'dftracer.libs')}"])
        out = os.path.join(work, "out")
        os.mkdir(out)
        base = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
        configs = []  # (label, exe key, cases, env, burst)
        for side in [s for s in ("ours", "ref") if s in exes]:
            for en in ("0", "1"):
                env = dict(base, DFTRACER_ENABLE=en, DFTRACER_INC_METADATA="1",
                           DFTRACER_LOG_FILE=os.path.join(out, "t"))
                state = "on" if en == "1" else "off"
                bursts = [0] + ([a.burst] if en == "1" and a.burst else [])
                for burst in bursts:
                    tag = f"{state}/burst" if burst else state
                    configs.append((f"{side} {tag}", side, C_CASES, env, burst))
                    if side == "ours":
                        configs.append((f"ours-cpp {tag}", "ours-cpp", ["plain"] + CPP_CASES,
                                        env, burst))
        res = {}
        for _ in range(a.rounds):
            for label, key, cases, env, burst in configs:
                for case in cases:
                    res.setdefault((label, case), []).append(
                        run(exes[key], case, a.calls, env, burst))
                    for f in os.listdir(out):
                        os.unlink(os.path.join(out, f))
        med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in res.items()}
        print(f"C/C++ regions, {a.calls:,} calls x {a.rounds} rounds, medians in ns per call "
              "(wall / calling thread CPU / process CPU incl. writer); added = minus plain; "
              f"'/burst': in bursts of {a.burst:,} calls 5 ms apart")
        print(f"{'config':<14} {'case':<12} {'wall':>8} {'thread':>8} {'process':>8} "
              f"{'added wall':>11} {'added process':>14}")
        record = {"calls": a.calls, "rounds": a.rounds, "burst": a.burst, "rows": []}
        for label, _, cases, _, _ in configs:
            p = med[(label, "plain")]
            for case in cases:
                w, t, pr = med[(label, case)]
                print(f"{label:<14} {case:<12} {w:8.2f} {t:8.2f} {pr:8.2f} "
                      f"{w - p[0]:11.2f} {pr - p[2]:14.2f}")
                record["rows"].append({"config": label, "case": case, "wall_ns": round(w, 2),
                                       "thread_cpu_ns": round(t, 2), "process_cpu_ns": round(pr, 2),
                                       "added_wall_ns": round(w - p[0], 2),
                                       "added_process_cpu_ns": round(pr - p[2], 2)})
        if a.record:
            with open(a.record, "w") as f:
                json.dump(record, f, indent=1)
                f.write("\n")
            print(f"record: {a.record}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
