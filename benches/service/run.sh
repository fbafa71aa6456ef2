#!/usr/bin/env bash
# Side-by-side cost of our dftracer_service and the reference one (dftracer 2.2.0 wheel):
# CPU time and RSS after DURATION seconds at 100 ms and 1000 ms sampling intervals, and
# trace bytes per sample. Not a timed test: run it by hand on a quiet machine.
#
#   benches/service/run.sh            # DURATION=30, venv in target/bench-venv-service
#   DURATION=60 VENV=/opt/ref benches/service/run.sh
#
# Columns:
#   cpu_ticks   utime+stime from /proc/<pid>/stat after DURATION s (clock ticks, so 10 ms
#               granularity; includes startup and exited threads)
#   cpu_ms      sum of /proc/<pid>/task/*/schedstat (ns on CPU, live threads) after DURATION s,
#               startup included: the figure to read at these small values
#   steady_ms   the same, over DURATION s starting 1 s after start (startup excluded)
#   rss/hwm/pss VmRSS, VmHWM (kB) and Pss from smaps_rollup (shared libc pages divided among
#               their users)
#   samples     `cpu` records (one per tick for both); bytes/sample = trace bytes / samples
# Rows: ours, ours_raw (ours with DFTRACER_TRACE_COMPRESSION=0: shows what the per-second gzip
# member costs), ref (the reference), floor (floor.c: reading the same files, nothing else).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${DURATION:-30}
INTERVALS=${INTERVALS:-"100 1000"}
VENV=${VENV:-$ROOT/target/bench-venv-service}
PYTHON=${PYTHON:-python3.11}
WORK=$(mktemp -d /tmp/dft-svc-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
cargo build --release -p dftracer-service >&2
OURS=$ROOT/target/release/dftracer_service

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" >&2
    "$VENV/bin/pip" install -q dftracer==2.2.0 dftracer-utils==0.0.14 >&2
fi
REF=$("$VENV/bin/python" -c 'import dftracer, os; print(os.path.join(os.path.dirname(dftracer.__file__), "bin", "dftracer_service"))')
VALIDATE=$VENV/bin/dftracer_validate
[ -x "$REF" ] || { echo "reference binary not found at $REF" >&2; exit 1; }

# The floor: a C loop reading the same files at the same interval (see floor.c).
FLOOR=""
if command -v cc >/dev/null; then
    cc -O2 -o "$WORK/floor" "$ROOT/benches/service/floor.c" && FLOOR=$WORK/floor
fi

IMPLS=${IMPLS:-"ours ours_raw ref"}
HZ=$(getconf CLK_TCK)
SHORT=$(hostname -s)

cpu_ticks_ms() { awk -v hz="$HZ" '{ printf "%.0f", ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
cpu_sched_ms() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.2f", s / 1e6 }'; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
wait_gone() { for _ in $(seq 1 500); do [ -d "/proc/$1" ] || return 0; grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null && return 0; sleep 0.02; done; }

pss_kb() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
FMT='%-8s %8s %9s %8s %9s %7s %7s %7s %7s %12s %12s  %s\n'
printf "$FMT" impl interval cpu_ticks cpu_ms steady_ms rss_kB hwm_kB pss_kB samples bytes/sample bytes/record validate
for interval in $INTERVALS; do
    declare -A PID=()
    for impl in $IMPLS; do
        bin=$OURS; [ "$impl" = ref ] && bin=$REF
        mkdir -p "$WORK/$impl-$interval/out" "$WORK/$impl-$interval/state"
        compression=1; [ "$impl" = ours_raw ] && compression=0
        env DFTRACER_ENABLE=1 DFTRACER_TRACE_COMPRESSION=$compression DFTRACER_LOG_FILE="$WORK/$impl-$interval/out/svc" \
            DFTRACER_TRACE_INTERVAL_MS="$interval" \
            "$bin" start "$WORK/$impl-$interval/state" >/dev/null
        for _ in $(seq 1 100); do
            [ -s "$WORK/$impl-$interval/state/dftracer_server_$SHORT.pid" ] && break
            sleep 0.02
        done
        PID[$impl]=$(cat "$WORK/$impl-$interval/state/dftracer_server_$SHORT.pid")
    done
    FPID=""
    if [ -n "$FLOOR" ]; then "$FLOOR" "$interval" & FPID=$!; fi
    declare -A T0=()
    sleep 1
    [ -n "$FPID" ] && F0=$(cpu_sched_ms "$FPID")
    for impl in $IMPLS; do T0[$impl]=$(cpu_sched_ms "${PID[$impl]}"); done
    sleep "$((DURATION - 1))"
    declare -A LINE=()
    for impl in $IMPLS; do
        p=${PID[$impl]}
        LINE[$impl]="$(cpu_ticks_ms "$p") $(cpu_sched_ms "$p") $(rss_kb "$p") $(hwm_kb "$p") $(pss_kb "$p")"
    done
    [ -n "$FPID" ] && FLINE="$(cpu_ticks_ms "$FPID") $(cpu_sched_ms "$FPID") $(rss_kb "$FPID") $(hwm_kb "$FPID") $(pss_kb "$FPID")"
    sleep 1
    if [ -n "$FPID" ]; then
        FLINE="$FLINE $(awk -v a="$F0" -v b="$(cpu_sched_ms "$FPID")" 'BEGIN { printf "%.2f", b - a }')"
        kill "$FPID"; wait "$FPID" 2>/dev/null || true
    fi
    for impl in $IMPLS; do
        T1=$(cpu_sched_ms "${PID[$impl]}")
        LINE[$impl]="${LINE[$impl]} $(awk -v a="${T0[$impl]}" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')"
    done
    for impl in $IMPLS; do
        bin=$OURS; [ "$impl" = ref ] && bin=$REF
        "$bin" stop "$WORK/$impl-$interval/state" >/dev/null 2>&1 || true
        wait_gone "${PID[$impl]}"
    done
    for impl in $IMPLS; do
        f=$(ls "$WORK/$impl-$interval/out/"*.pfw* | grep -v '\.pfw\.gz\.gz$' | head -1)
        bytes=$(stat -c %s "$f")
        samples=$(zcat -f "$f" | grep -c '"name":"cpu",' || true)
        records=$(zcat -f "$f" | grep -c '"ph":2' || true)
        vf=$f
        # dftracer_validate reads gzip traces only: check a compressed copy of a plain one.
        case $f in *.pfw) gzip -c "$f" >"$f.gz"; vf=$f.gz ;; esac
        v=$("$VALIDATE" --files "$vf" 2>&1 | grep -o '[0-9]* passed, [0-9]* failed' | head -1 || true)
        read -r ticks sched rss hwm pss steady <<<"${LINE[$impl]}"
        printf "$FMT" "$impl" "${interval}ms" \
            "${ticks}ms" "$sched" "$steady" "$rss" "$hwm" "$pss" "$samples" \
            "$(( samples > 0 ? bytes / samples : 0 ))" "$(( records > 0 ? bytes / records : 0 ))" "${v:-n/a}"
    done
    if [ -n "$FPID" ]; then
        read -r ticks sched rss hwm pss steady <<<"$FLINE"
        printf "$FMT" floor "${interval}ms" "${ticks}ms" "$sched" "$steady" "$rss" "$hwm" "$pss" - - - -
    fi
    unset PID LINE T0
done
echo "machine: $(nproc) cpus, $(uname -r), $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg), ${DURATION}s per run"
