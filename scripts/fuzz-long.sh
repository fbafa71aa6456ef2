#!/usr/bin/env bash
# Coverage-guided fuzzing of every target with libFuzzer (long; see fuzz/README.md).
# FUZZ_SECONDS per target (default 600). Uses a nightly toolchain when present, else the
# stable compiler with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs unstable sanitizer flags).
# AddressSanitizer is on (cargo-fuzz's default); FUZZ_SANITIZER=none trades it for 2-3x the
# executions on targets that reach only safe code.
source "$(dirname "$0")/env.sh"
cd "$ROOT/fuzz"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
if rustup toolchain list 2>/dev/null | grep -q nightly; then tc=(+nightly); else tc=(); export RUSTC_BOOTSTRAP=1; fi
for t in json_encoder gzip_member ring_model config record_decode proc_parsers fast_deflate; do
  mkdir -p "corpus/$t"
  echo "== $t (${FUZZ_SECONDS:-600} s)"
  cargo "${tc[@]}" fuzz run -s "${FUZZ_SANITIZER:-address}" "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="${FUZZ_SECONDS:-600}" -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY" || true
done
