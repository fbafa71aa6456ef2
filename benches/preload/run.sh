#!/usr/bin/env bash
# Overhead of libdftracer_preload.so vs no tracer vs the reference preload (dftracer 2.2.0).
#
#   benches/preload/run.sh [rounds]        (default 5 rounds; medians are reported)
#
# Workloads (bench.c), each on a file inside DATA_DIR (traced) and outside it (untraced),
# metadata on (DFTRACER_INC_METADATA=1), in two settings (SETTINGS, default both):
#   perop    one workload per process: 1,000,000 x pread 4 KiB; 100,000 x open+close
#   oneproc  both in ONE process: the preads, then the open+closes (`bench both`), as a
#            real program runs: the open+close phase starts while the tracer still holds
#            the pread phase's events; two extra configurations run the whole process on
#            one CPU (taskset), where the writer's work adds to the calling thread's wall
#            time.
# Besides wall time, a last table gives the CPU time (user + system) added per call in the
# calling thread and in the whole process (the tracer's writer thread included), which the
# machine's other load inflates far less than wall time.
# Configurations, alternated round by round so drift hits all alike:
#   none     no LD_PRELOAD
#   ours-off our library loaded, DFTRACER_ENABLE=0 (the plain-forward path)
#   ours     our library, tracing on
#   ref      the reference libdftracer_preload.so from `pip install dftracer==2.2.0`
#   none-1cpu, ours-1cpu   (oneproc only) none / ours under `taskset -c 0`
# Reference venv: $DFT_REF_VENV (default $HOME/.cache/dftracer-bench/v), created on first run.
# Set DFT_NO_REF=1 to skip the reference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
PREADS=${PREADS:-1000000}
OPENS=${OPENS:-100000}
SETTINGS=${SETTINGS:-perop oneproc}

cargo build --release -q -p dftracer-preload --manifest-path "$root/Cargo.toml"
target=${CARGO_TARGET_DIR:-$root/target}
ours="$target/release/libdftracer_preload.so"

ref=""
if [ "${DFT_NO_REF:-0}" != 1 ]; then
    venv=${DFT_REF_VENV:-$HOME/.cache/dftracer-bench/v}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q dftracer==2.2.0
    fi
    ref=$(ls "$venv"/lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data" "$work/other" "$work/out"
gcc -O2 -o "$work/bench" "$here/bench.c"
head -c $((1 << 20)) /dev/urandom > "$work/data/f.bin"
cp "$work/data/f.bin" "$work/other/f.bin"

run() { # config where bench-args... -> bench's lines: op n wall thread-cpu process-cpu
    local cfg=$1 where=$2
    shift 2
    local env=(DFTRACER_DATA_DIR="$work/data" DFTRACER_INC_METADATA=1 DFTRACER_LOG_FILE="$work/out/t")
    local pin=()
    case $cfg in
        none) env=() ;;
        none-1cpu) env=() pin=(taskset -c 0) ;;
        ours-off) env+=(LD_PRELOAD="$ours" DFTRACER_ENABLE=0 DFTRACER_INIT=PRELOAD) ;;
        ours) env+=(LD_PRELOAD="$ours" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD) ;;
        ours-1cpu) env+=(LD_PRELOAD="$ours" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD) pin=(taskset -c 0) ;;
        ref) env+=(LD_PRELOAD="$ref" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD) ;;
    esac
    env "${env[@]}" "${pin[@]}" "$work/bench" "$1" "$work/$where/f.bin" "${@:2}"
    rm -f "$work"/out/*
}

configs=(none ours-off ours)
[ -n "$ref" ] && configs+=(ref)
one_configs=("${configs[@]}" none-1cpu ours-1cpu)
# res[setting/cfg/op/where] = wall values; cpu[...] = "thread:process" pairs (oneproc).
declare -A res cpu
for ((r = 0; r < rounds; r++)); do
    for where in data other; do
        for setting in $SETTINGS; do
            if [ "$setting" = perop ]; then
                for op in pread openclose; do
                    n=$PREADS; [ $op = openclose ] && n=$OPENS
                    for cfg in "${configs[@]}"; do
                        read -r _ _ wall thr proc < <(run "$cfg" "$where" "$op" "$n")
                        res[perop/$cfg/$op/$where]+="$wall "
                        cpu[perop/$cfg/$op/$where/thread]+="$thr "
                        cpu[perop/$cfg/$op/$where/process]+="$proc "
                    done
                done
            else
                for cfg in "${one_configs[@]}"; do
                    while read -r op _ wall thr proc; do
                        res[oneproc/$cfg/$op/$where]+="$wall "
                        cpu[oneproc/$cfg/$op/$where/thread]+="$thr "
                        cpu[oneproc/$cfg/$op/$where/process]+="$proc "
                    done < <(run "$cfg" "$where" both "$PREADS" "$OPENS")
                done
            fi
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '%s\n' "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
printf '%s\n' "rounds: $rounds; preads: $PREADS; open+close: $OPENS; medians in ns per call"
table() { # setting
    local s=$1
    printf '%-22s %9s %9s %9s %9s %10s %10s %8s\n' "$s wall" none ours-off ours ref "ours+ns" "ref+ns" "ref/ours"
    for op in pread openclose; do
        for where in data other; do
            label="$op $( [ $where = data ] && echo inside || echo outside )"
            declare -A m=()
            for cfg in "${configs[@]}"; do m[$cfg]=$(echo "${res[$s/$cfg/$op/$where]}" | median); done
            refv=${m[ref]:-nan}
            awk -v l="$label" -v n="${m[none]}" -v off="${m[ours-off]}" -v o="${m[ours]}" -v r="$refv" 'BEGIN {
                oa = o - n; ra = (r == "nan") ? "nan" : r - n;
                ratio = (r == "nan" || oa <= 0) ? "-" : sprintf("%.1f", ra / oa);
                printf "%-22s %9.1f %9.1f %9.1f %9s %10.1f %10s %8s\n", l, n, off, o, r, oa, (ra == "nan" ? "nan" : sprintf("%.1f", ra)), ratio }'
        done
    done
}
for setting in $SETTINGS; do
    table "$setting"
done
# CPU time added per call, which the machine's other load inflates far less than wall time:
# the calling thread's, and the whole process's (our writer thread included); in the
# one-process setting also the wall time added with the whole process on one CPU, where the
# writer's work adds to the calling thread's wall time.
printf '%-22s %11s %11s %11s %11s %12s %12s\n' "cpu added" "ours thread" "ours proc" "ref thread" "ref proc" "1cpu none" "1cpu ours+"
for k in $SETTINGS; do
    for op in pread openclose; do
        for where in data other; do
            label="$k $op $( [ $where = data ] && echo in || echo out )"
            m() { echo "${cpu[$k/$1/$op/$where/$2]:-}" | median; }
            nt=$(m none thread) np=$(m none process) ot=$(m ours thread) op_=$(m ours process)
            rt=nan rp=nan n1=nan o1=nan
            if [ -n "$ref" ]; then rt=$(m ref thread) rp=$(m ref process); fi
            if [ "$k" = oneproc ]; then
                n1=$(echo "${res[$k/none-1cpu/$op/$where]}" | median)
                o1=$(echo "${res[$k/ours-1cpu/$op/$where]}" | median)
            fi
            awk -v l="$label" -v nt="$nt" -v np="$np" -v ot="$ot" -v op="$op_" -v rt="$rt" -v rp="$rp" -v n1="$n1" -v o1="$o1" '
                function d(a, b) { return (a == "nan" || b == "nan") ? "-" : sprintf("%.1f", a - b) }
                BEGIN {
                    printf "%-22s %11s %11s %11s %11s %12s %12s\n", l, d(ot, nt), d(op, np), d(rt, nt), d(rp, np),
                        (n1 == "nan" ? "-" : sprintf("%.1f", n1)), d(o1, n1) }'
        done
    done
done
