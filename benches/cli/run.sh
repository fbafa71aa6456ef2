#!/usr/bin/env bash
# Throughput of `dftracer summary` and `dftracer perfetto` in MB/s of decompressed trace, on
# one core (-j 1, one file and all files) and on every core (-j N, all files), next to
# dftracer_stats of dftracer-utils 0.0.14 on the same files (with its index built, and
# cached). Traces: 4 files written by examples/threads (2 threads x 250,000 steps each).
#   bash benches/cli/run.sh        (record: benches/record/cli.md)
source "$(dirname "$0")/../../scripts/env.sh"
cd "$ROOT"
cargo build --release -q -p dftracer-cli -p dftracer-examples
venv "$ROOT/.venv-utils" dftracer-utils==0.0.14
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
for i in 1 2 3 4; do ./target/release/threads "$work/r$i" 2 250000 >/dev/null; done
mkdir -p "$work/all"; mv "$work"/r*/threads-*.pfw.gz "$work/all/"
one="$(ls "$work"/all/*.pfw.gz | head -n 1)"
mb() { python3 -c "import gzip,sys; print(sum(len(gzip.open(f).read()) for f in sys.argv[1:]) / 1e6)" "$@"; }
mb_one=$(mb "$one"); mb_all=$(mb "$work"/all/*.pfw.gz)
best() { # best of 3 wall times of a command
  local b=999
  for _ in 1 2 3; do
    local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    b=$(python3 -c "print(min($b, $t1 - $t0))")
  done
  echo "$b"
}
row() { printf '%-44s %8.2f s %8.0f MB/s\n' "$1" "$2" "$(python3 -c "print($3 / $2)")"; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "input: 1 file $mb_one MB, 4 files $mb_all MB decompressed"
row "summary -j 1, one file" "$(best ./target/release/dftracer summary -q -j 1 "$one")" "$mb_one"
row "summary -j 1, 4 files" "$(best ./target/release/dftracer summary -q -j 1 "$work/all")" "$mb_all"
row "summary -j $(nproc), 4 files" "$(best ./target/release/dftracer summary -q "$work/all")" "$mb_all"
row "perfetto -j 1, one file" "$(best ./target/release/dftracer perfetto -q -j 1 "$one" -o "$work/o.json")" "$mb_one"
row "perfetto -j 1, 4 files" "$(best ./target/release/dftracer perfetto -q -j 1 "$work/all" -o "$work/o.json")" "$mb_all"
row "perfetto -j $(nproc), 4 files" "$(best ./target/release/dftracer perfetto -q "$work/all" -o "$work/o.json")" "$mb_all"
row "perfetto -j $(nproc), 4 files, .json.gz" "$(best ./target/release/dftracer perfetto -q "$work/all" -o "$work/o.json.gz")" "$mb_all"
stats=("$ROOT/.venv-utils/bin/dftracer_stats" -d "$work/all" --log-level off)
t0=$(date +%s.%N); "${stats[@]}" >/dev/null 2>&1; t1=$(date +%s.%N)
row "dftracer_stats, 4 files, builds its index" "$(python3 -c "print($t1 - $t0)")" "$mb_all"
row "dftracer_stats, 4 files, index cached" "$(best "${stats[@]}")" "$mb_all"
