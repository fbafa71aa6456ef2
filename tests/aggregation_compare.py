"""Compares two traces of the same I/O workload, one written with aggregation off and one
with it on: per event name, the number of events (`dft_cnt` of ph 3 records) and the sum of
every numeric arg (`<key>_sum`, or the plain value of a bucket of one) must agree exactly.
`dur` is compared only in count (two runs take different times; the exact `dur` sums are
pinned by core/tests/lifecycle.rs on events with given times), and so are process calls but
for their `status`. Prints the read/write bytes.

    python tests/aggregation_compare.py OFF_DIR ON_DIR
"""

import glob
import gzip
import json
import sys
from collections import defaultdict

SKIP = {"hhash", "dft_cnt", "dur", "fhash"}
# Process calls (the shell's forks and waits: FORMAT.md "Process calls"): their args are pids
# and lengths (`ret`, `pid`, `call_dur`), which differ between two runs; compared in count.
PROCESS = {"fork", "vfork", "wait", "waitpid", "wait4", "posix_spawn", "posix_spawnp",
           "system", "popen", "pclose"}


def sums(directory, aggregated):
    out = defaultdict(lambda: defaultdict(int))
    for f in sorted(glob.glob(directory + "/*.pfw.gz")):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                rec = json.loads(line)
                if rec.get("cat") == "dftracer":
                    continue
                args = rec.get("args", {})
                name = rec["name"]
                if name in PROCESS:
                    args = {k: v for k, v in args.items() if k in ("dft_cnt", "status", "status_sum")}
                if rec.get("ph") == 1 and not aggregated:
                    out[name]["#events"] += 1
                    for k, v in args.items():
                        if k not in SKIP and isinstance(v, int):
                            out[name][k] += v
                elif rec.get("ph") == 3 and aggregated:
                    out[name]["#events"] += args["dft_cnt"]
                    for k, v in args.items():
                        if k in SKIP or not isinstance(v, int):
                            continue
                        if k.endswith("_sum"):
                            if k[:-4] != "dur":
                                out[name][k[:-4]] += v
                        elif not (k.endswith("_min") or k.endswith("_max")):
                            assert args["dft_cnt"] == 1, f"plain {k} with dft_cnt > 1: {rec}"
                            out[name][k] += v
    return {n: dict(v) for n, v in out.items()}


def main():
    off, on = sums(sys.argv[1], False), sums(sys.argv[2], True)
    if off != on:
        for n in sorted(set(off) | set(on)):
            if off.get(n) != on.get(n):
                print(f"  {n}: off {off.get(n)} on {on.get(n)}")
        print("FAIL: per-name sums differ between aggregation off and on")
        return 1
    rw = sum(v.get("ret", 0) for n, v in off.items() if n in ("read", "write", "pread64", "pwrite64"))
    print(f"aggregation off/on: {len(off)} names, {sum(v['#events'] for v in off.values())} events, "
          f"per-name sums equal; read+write bytes {rw}")
    print(f"bytes={rw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
