#!/usr/bin/env bash
# `make clean`: removes what building, testing, benchmarking and the demo made in this clone,
# and says what it removed and how much space that was. Keeps the fuzzing corpus and crash
# artifacts (fuzz/corpus, fuzz/artifacts: results of `make fuzz-long`), which it only reports.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
shopt -s nullglob
made=(
  target                                    # cargo: every build (also target/wheels, target/test-logs)
  fuzz/target                               # cargo: the fuzz workspace
  .venv-*                                   # venvs: demo, test, utils, strace, bench, ref, dist, torch, dlio (and torch itself: .venv-torch-site)
  frontends/python/python/dftracer/_native  # native library, headers, pkg-config/CMake files, tool: build.rs
  dist                                      # make dist's wheels and sdist
  dft-demo                                  # make demo's output (DFT_DEMO_OUT elsewhere is not touched)
)
human() { awk -v k="$1" 'BEGIN { split("KB MB GB TB", u); i = 1; while (k >= 1024 && i < 4) { k /= 1024; i++ }; printf "%.1f %s", k, u[i] }'; }
total=0
for p in "${made[@]}"; do
  [ -e "$p" ] || continue
  kb=$(du -sk "$p" 2>/dev/null | cut -f1)
  total=$((total + kb))
  rm -rf "$p"
  printf '  removed %-44s %10s\n' "$p/" "$(human "$kb")"
done
# Python caches and build metadata left next to the sources
n=0
while IFS= read -r -d '' d; do rm -rf "$d"; n=$((n + 1)); done \
  < <(find . -path ./.git -prune -o \( -name __pycache__ -o -name '*.egg-info' -o -name .pytest_cache \) -type d -print0)
((n)) && echo "  removed $n __pycache__/.egg-info/.pytest_cache directories"
echo "make clean: $(human "$total") freed"
for p in fuzz/corpus fuzz/artifacts; do
  [ -e "$p" ] && echo "  kept $p/ ($(du -sh "$p" | cut -f1)): fuzzing results; rm -rf it yourself"
done
exit 0
