#!/usr/bin/env bash
# Ecosystem check: traces written by our examples are accepted by dftracer-utils 0.0.14 from
# PyPI (installed here, never vendored): dftracer_validate passes every file and
# dftracer_event_count equals the number of event lines (ph 1, and ph 3 for folded calls) we
# count ourselves.
source "$(dirname "$0")/../scripts/env.sh"
cd "$ROOT"
UTILS="$ROOT/.venv-utils"
venv "$UTILS" dftracer-utils==0.0.14
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo run -q --release -p dftracer-examples --bin threads -- "$work/core" 4 20000 >/dev/null
dirs=("$work/core/")
if [ -x "$ROOT/.venv-test/bin/python" ] && "$ROOT/.venv-test/bin/python" -c "import dftracer.python" 2>/dev/null; then
  DFTRACER_ENABLE=1 "$ROOT/.venv-test/bin/python" examples/train.py --out "$work/train" --quiet >/dev/null
  dirs+=("$work/train/traces/")
fi
pass=0; fail=0
for dir in "${dirs[@]}"; do
  files=("$dir"*.pfw.gz)
  [ -e "${files[0]}" ] || continue
  out=$("$UTILS/bin/dftracer_validate" --files "${files[@]}" 2>/dev/null | grep -E '^Validated' || true)
  echo "validate $(basename "$dir"): $out"
  case "$out" in *" 0 failed"*) pass=$((pass+1));; *) echo "FAIL: dftracer_validate did not pass every file"; fail=$((fail+1));; esac
  theirs=$("$UTILS/bin/dftracer_event_count" -d "$dir" 2>/dev/null | tail -n 1 | tr -dc '0-9')
  ours=$(python3 - "${files[@]}" <<'PY'
import gzip, json, sys
n = 0
for f in sys.argv[1:]:
    with gzip.open(f, "rt") as fh:
        for line in fh:
            # Complete events and ph 3 records (folded calls, FORMAT.md "Folded calls"):
            # dftracer_event_count counts each line of either as one event.
            if json.loads(line).get("ph") in (1, 3):
                n += 1
print(n)
PY
)
  echo "event_count $(basename "$dir"): dftracer_event_count=$theirs ours=$ours"
  if [ -n "$ours" ] && [ "$theirs" = "$ours" ]; then pass=$((pass+1)); else echo "FAIL: event counts differ"; fail=$((fail+1)); fi
done

# Aggregation: the same I/O workload (dd and cat under our preload library) with aggregation
# off and on. Per-name event counts and sums of every numeric arg agree exactly
# (tests/aggregation_compare.py), and so do `dftracer summary`'s I/O bytes. dfanalyzer
# (dftracer-analyzer 0.0.9, which needs dftracer-utils 0.0.12 and USER) must report the
# bytes the trace holds for the plain trace. For the aggregated one it is run and its figure
# printed, not compared: that version reads ph 3 records as single plain events (no `_sum`),
# for the reference's aggregated traces too (checked with dftracer 2.2.0), so no trace
# format can make it agree.
cargo build -q --release -p dftracer-preload -p dftracer-cli
venv "$ROOT/.venv-dfa" dftracer-analyzer dftracer-utils==0.0.12
data="$work/aggdata"; mkdir -p "$data"
head -c 3000000 /dev/urandom > "$data/in.bin"
# Folding off on both sides: the comparison is of aggregation alone (with it on, folded calls
# would be ph 3 records in the plain trace too, without their args).
for agg in 0 1; do
  mkdir -p "$work/agg$agg"
  DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD DFTRACER_ENABLE_AGGREGATION=$agg DFTRACER_FOLD_CALLS=0 DFTRACER_DATA_DIR="$data" \
    DFTRACER_LOG_FILE="$work/agg$agg/t" LD_PRELOAD="$ROOT/target/release/libdftracer_preload.so" \
    sh -c "dd if=$data/in.bin of=$data/out.bin bs=65536 2>/dev/null; dd if=$data/out.bin of=/dev/null bs=4096 2>/dev/null; cat $data/in.bin $data/out.bin >/dev/null"
done
if cmp_out=$(python3 tests/aggregation_compare.py "$work/agg0" "$work/agg1"); then
  echo "$cmp_out" | head -n 1; pass=$((pass+1))
else
  echo "$cmp_out"; fail=$((fail+1))
fi
bytes=$(echo "$cmp_out" | sed -n 's/^bytes=//p')
ours() { ./target/release/dftracer summary --json "$1" | python3 -c "import json,sys; t=json.load(sys.stdin)['total']['io_by_family']; print(sum(t[k]['bytes'] for k in ('read','write') if k in t))"; }
s0=$(ours "$work/agg0"); s1=$(ours "$work/agg1")
echo "dftracer summary: I/O bytes off $s0, on $s1 (trace holds $bytes)"
if [ "$s0" = "$bytes" ] && [ "$s1" = "$bytes" ]; then pass=$((pass+1)); else echo "FAIL: dftracer summary bytes"; fail=$((fail+1)); fi
dfa_mb() { # dfanalyzer's "POSIX - All Size" (MiB) for a trace directory
  USER="${USER:-root}" "$ROOT/.venv-dfa/bin/dfanalyzer" trace_path="$1" analyzer/preset=posix \
    cluster.n_workers=1 hydra.run.dir="$2" >"$2.log" 2>&1 || { echo "dfanalyzer failed:" >&2; tail -n 20 "$2.log" >&2; }
  sed -n 's/.*POSIX - All Size *│ *MB *│ *\([0-9.]*\).*/\1/p' "$2.log" | head -n 1
}
mb0=$(dfa_mb "$work/agg0" "$work/dfa0"); mb1=$(dfa_mb "$work/agg1" "$work/dfa1")
want_mb=$(python3 -c "print('%.3f' % ($bytes / 2**20))")
echo "dfanalyzer: POSIX size off ${mb0:-none} MB, on ${mb1:-none} MB (trace holds $want_mb MiB; on: ph 3 not read by dfanalyzer 0.0.9)"
if [ "$mb0" = "$want_mb" ]; then pass=$((pass+1)); else echo "FAIL: dfanalyzer bytes of the plain trace"; fail=$((fail+1)); fi

# Process calls are not I/O time (FORMAT.md "Process calls"): a parent that forks four
# workers (each reads 1 MiB from the data dir, then sleeps 50 ms) and waits for each. The
# trace holds the forks and waits with dur 0 and their length in args.call_dur; dfanalyzer's
# POSIX layer time must be the reads' time (about a millisecond), not the ~200 ms of waiting.
pc="$work/pctl"; mkdir -p "$pc/data" "$pc/o"
for i in 0 1 2 3; do head -c 1048576 /dev/urandom > "$pc/data/f$i"; done
cat > "$pc/launch.c" <<'C'
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    for (int k = 0; k < 4; k++) {
        pid_t p = fork();
        if (p < 0) return 1;
        if (p == 0) {
            char f[512], b[65536];
            snprintf(f, sizeof f, "%s/f%d", argv[1], k);
            int fd = open(f, O_RDONLY);
            if (fd < 0) _exit(2);
            while (read(fd, b, sizeof b) > 0) {}
            close(fd);
            usleep(50 * 1000);
            _exit(0);
        }
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    }
    return 0;
}
C
gcc -O2 -o "$pc/launch" "$pc/launch.c"
DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD DFTRACER_DATA_DIR="$pc/data" DFTRACER_LOG_FILE="$pc/o/t" \
  LD_PRELOAD="$ROOT/target/release/libdftracer_preload.so" "$pc/launch" "$pc/data"
sums=$(python3 - "$pc/o" <<'PY'
import glob, gzip, json, sys
io = calls = 0
for f in glob.glob(sys.argv[1] + "/*.pfw.gz"):
    for line in gzip.open(f, "rt"):
        e = json.loads(line)
        if e.get("ph") == 1 and e.get("cat") == "POSIX":
            io += e["dur"]
            calls += e.get("args", {}).get("call_dur", 0)
print(io / 1e6, calls / 1e6)
PY
)
read -r io_s calls_s <<<"$sums"
# 10 ms time windows: dfanalyzer's layer time is, per window, the busiest process's I/O time;
# with its default 1 s windows the four workers' reads (one after the other) share a window
# and only one of them counts (it printed 0.000 s against 1.56 ms of reads once).
USER="${USER:-root}" "$ROOT/.venv-dfa/bin/dfanalyzer" trace_path="$pc/o" analyzer/preset=posix \
  cluster.n_workers=1 analyzer.time_granularity=0.01 hydra.run.dir="$pc/dfa" >"$pc/dfa.log" 2>&1 || tail -n 20 "$pc/dfa.log" >&2
layer_s=$(sed -n 's/^│ POSIX - All *│ *\([0-9.]*\) *│.*/\1/p' "$pc/dfa.log" | head -n 1)
echo "dfanalyzer: POSIX layer time ${layer_s:-none} s; the trace's POSIX dur $io_s s, process calls' call_dur $calls_s s"
if python3 -c "import sys; l, io, c = map(float, sys.argv[1:]); sys.exit(0 if c > 0.15 and abs(l - io) <= 0.0015 else 1)" \
  "${layer_s:-99}" "$io_s" "$calls_s"; then
  pass=$((pass+1))
else
  echo "FAIL: dfanalyzer's POSIX time is not the I/O calls' time"; fail=$((fail+1))
fi

# The library layers in dfanalyzer: a trace dir with HDF5 events (h5py under the preload) and
# MPI-IO events (test_mpiio.py's C program, two Open MPI ranks under the preload).
# dfanalyzer 0.0.9's generic preset makes one layer per `cat` (FORMAT.md "MPI-IO calls"):
# its "hdf5 Count" and "MPI-IO Count" must be the number of HDF5 and MPIIO events the trace
# files hold, and both layers must be in its layer breakdown.
lay="$work/layers"; mkdir -p "$lay/data" "$lay/other" "$lay/t"
lay_env=(DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD DFTRACER_DATA_DIR="$lay/data")
"$ROOT/.venv-test/bin/python" -c "import h5py" 2>/dev/null && command -v mpirun.openmpi >/dev/null 2>&1 && have_layers=1 || have_layers=0
if ((have_layers)); then
  env "${lay_env[@]}" DFTRACER_LOG_FILE="$lay/t/h5" LD_PRELOAD="$ROOT/target/release/libdftracer_preload.so" \
    "$ROOT/.venv-test/bin/python" -c "
import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + '/d.h5', 'w') as f:
    f.create_dataset('x', data=np.arange(4096.0))
with h5py.File(sys.argv[1] + '/d.h5', 'r') as f:
    f['x'][100:116]" "$lay/data"
  gcc -O1 -o "$lay/mpiio_app" frontends/python/tests/mpiio_app.c /usr/lib/x86_64-linux-gnu/libmpi.so.40
  mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD="$ROOT/target/release/libdftracer_preload.so" \
    -x DFTRACER_ENABLE=1 -x DFTRACER_INIT=PRELOAD -x DFTRACER_DATA_DIR="$lay/data" -x DFTRACER_LOG_FILE="$lay/t/mpi" \
    "$lay/mpiio_app" "$lay/data" "$lay/other" 1000 >/dev/null
  want=$(python3 - "$lay/t" <<'PY'
import collections, glob, gzip, json, sys
n = collections.Counter()
for f in glob.glob(sys.argv[1] + "/*.pfw.gz"):
    for line in gzip.open(f, "rt"):
        e = json.loads(line)
        if e.get("ph") == 1:
            n[e["cat"]] += 1
print(n["HDF5"], n["MPIIO"])
PY
)
  read -r want_h5 want_mpi <<<"$want"
  USER="${USER:-root}" "$ROOT/.venv-dfa/bin/dfanalyzer" trace_path="$lay/t" analyzer/preset=generic \
    cluster.n_workers=1 hydra.run.dir="$lay/dfa" >"$lay/dfa.log" 2>&1 || tail -n 20 "$lay/dfa.log" >&2
  got_h5=$(sed -n 's/^│ hdf5 Count *│ *count *│ *\([0-9]*\) *│.*/\1/p' "$lay/dfa.log" | head -n 1)
  got_mpi=$(sed -n 's/^│ MPI-IO Count *│ *count *│ *\([0-9]*\) *│.*/\1/p' "$lay/dfa.log" | head -n 1)
  rows=$(grep -c -E '^│ (hdf5|MPI-IO) +│ +[0-9.]+ +│' "$lay/dfa.log" || true)
  echo "dfanalyzer layers: hdf5 ${got_h5:-none} ops, MPI-IO ${got_mpi:-none} ops, $rows layer rows (the trace holds $want_h5 HDF5 and $want_mpi MPIIO events)"
  if [ "$want_h5" -gt 0 ] && [ "$want_mpi" -gt 0 ] && [ "$got_h5" = "$want_h5" ] && [ "$got_mpi" = "$want_mpi" ] && [ "$rows" = 2 ]; then
    pass=$((pass+1))
  else
    echo "FAIL: dfanalyzer's hdf5 and MPI-IO layers"; fail=$((fail+1))
  fi
else
  echo "FAIL: the dfanalyzer layers check needs h5py in .venv-test and Open MPI (mpirun.openmpi): not run"; fail=$((fail+1))
fi

# dfanalyzer on a DLIO-like run, ours against the reference (tests/dfa_compare.py): the same
# annotated Python workload (tests/dlio_like.py: fork and spawn data-loader workers reading
# 1 MiB per call, an evaluation pass, checkpoints) traced by our wheel (.venv-test) and by
# dftracer 2.2.0 + pydftracer 2.0.6 (.venv-ref, as scripts/bench.sh makes it), 5 rounds each
# (about 50 s); dfanalyzer's POSIX size and ops equal, its time within 20 % of our trace's own
# POSIX dur, time and bandwidth within a factor of 2 of the reference's (the runs' own timing,
# which checkpoint writes on a busy disk move), once the calls the reference does not trace
# (listed in the script with the reason) are left out.
venv "$ROOT/.venv-ref" dftracer==2.2.0 pydftracer==2.0.6 typing_extensions numpy
if "$ROOT/.venv-test/bin/python" -c "import dftracer.python" 2>/dev/null; then
  mkdir -p "$work/dlio"
  if dfa_out=$(python3 tests/dfa_compare.py --ours "$ROOT/.venv-test/bin/python" --ref "$ROOT/.venv-ref/bin/python" \
    --dfa "$ROOT/.venv-dfa/bin/dfanalyzer" --work "$work/dlio"); then
    echo "$dfa_out"; pass=$((pass+1))
  else
    echo "$dfa_out"; echo "FAIL: dfanalyzer on the DLIO-like run, ours against the reference"; fail=$((fail+1))
  fi
else
  echo "FAIL: no .venv-test with our wheel (scripts/test.sh's wheel step): the DLIO-like comparison did not run"; fail=$((fail+1))
fi

echo "ecosystem: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
