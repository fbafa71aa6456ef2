#!/usr/bin/env bash
# Overhead of libdftracer_preload.so vs no tracer vs the reference preload (dftracer 2.2.0).
#
#   benches/preload/run.sh [rounds]        (default 5 rounds; medians are reported)
#
# Workloads (bench.c): 1,000,000 x pread 4 KiB, 100,000 x open+close, each on a file inside
# DATA_DIR (traced) and outside it (untraced), metadata on (DFTRACER_INC_METADATA=1).
# Configurations, alternated round by round so drift hits all alike:
#   none     no LD_PRELOAD
#   ours-off our library loaded, DFTRACER_ENABLE=0 (the plain-forward path)
#   ours     our library, tracing on
#   ref      the reference libdftracer_preload.so from `pip install dftracer==2.2.0`
# Reference venv: $DFT_REF_VENV (default $HOME/.cache/dftracer-bench/v), created on first run.
# Set DFT_NO_REF=1 to skip the reference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
PREADS=${PREADS:-1000000}
OPENS=${OPENS:-100000}

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

run() { # config op where n -> ns per call
    local cfg=$1 op=$2 where=$3 n=$4
    local env=(DFTRACER_DATA_DIR="$work/data" DFTRACER_INC_METADATA=1 DFTRACER_LOG_FILE="$work/out/t")
    case $cfg in
        none) env=() ;;
        ours-off) env+=(LD_PRELOAD="$ours" DFTRACER_ENABLE=0 DFTRACER_INIT=PRELOAD) ;;
        ours) env+=(LD_PRELOAD="$ours" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD) ;;
        ref) env+=(LD_PRELOAD="$ref" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD) ;;
    esac
    local out
    out=$(env "${env[@]}" "$work/bench" "$op" "$work/$where/f.bin" "$n")
    rm -f "$work"/out/*
    echo "$out" | awk '{print $3}'
}

configs=(none ours-off ours)
[ -n "$ref" ] && configs+=(ref)
declare -A res
for ((r = 0; r < rounds; r++)); do
    for op in pread openclose; do
        n=$PREADS; [ $op = openclose ] && n=$OPENS
        for where in data other; do
            for cfg in "${configs[@]}"; do
                res[$cfg/$op/$where]+="$(run $cfg $op $where $n) "
            done
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '%s\n' "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
printf '%s\n' "rounds: $rounds; preads: $PREADS; open+close: $OPENS; medians in ns per call"
printf '%-22s %9s %9s %9s %9s %10s %10s %8s\n' workload none ours-off ours ref "ours+ns" "ref+ns" "ref/ours"
for op in pread openclose; do
    for where in data other; do
        label="$op $( [ $where = data ] && echo inside || echo outside )"
        declare -A m=()
        for cfg in "${configs[@]}"; do m[$cfg]=$(echo "${res[$cfg/$op/$where]}" | median); done
        refv=${m[ref]:-nan}
        awk -v l="$label" -v n="${m[none]}" -v off="${m[ours-off]}" -v o="${m[ours]}" -v r="$refv" 'BEGIN {
            oa = o - n; ra = (r == "nan") ? "nan" : r - n;
            ratio = (r == "nan" || oa <= 0) ? "-" : sprintf("%.1f", ra / oa);
            printf "%-22s %9.1f %9.1f %9.1f %9s %10.1f %10s %8s\n", l, n, off, o, r, oa, (ra == "nan" ? "nan" : sprintf("%.1f", ra)), ratio }'
    done
done
