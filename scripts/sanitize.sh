#!/usr/bin/env bash
# `make sanitize`: the unsafe code under checkers that need a nightly toolchain (not part of
# `make test`, which runs the loom models on stable):
#   - Miri: the ring's unit tests (core/src/ring.rs) and the preload library's fd/FILE* tables
#     (frontends/preload/src/table.rs): undefined behaviour, Stacked Borrows aliasing, data
#     races, weak-memory outcomes;
#   - AddressSanitizer and ThreadSanitizer: core's lifecycle tests (core/tests/lifecycle.rs:
#     real threads, the writer, fork, signals, full disks), std rebuilt with the sanitizer.
# Without a nightly toolchain it says what it would run and how to get one, and exits 0; a
# missing component skips what needs it, saying so (no miri: no Miri; no rust-src: no TSan,
# and ASan with an uninstrumented std). SANITIZE_STEPS picks steps (default "miri asan
# tsan"). On 2 cores: about 20 min from cold (std is rebuilt for each sanitizer), 8 once built.
source "$(dirname "$0")/env.sh"
cd "$ROOT"
step() { echo; echo "=== $*"; }
steps="${SANITIZE_STEPS:-miri asan tsan}"
get="rustup toolchain install nightly --component miri rust-src"

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "make sanitize: skipped: no nightly toolchain. It would run Miri on the ring and preload table tests and AddressSanitizer/ThreadSanitizer on core's lifecycle tests. Get one with: $get"
  exit 0
fi
have() { rustup +nightly component list --installed 2>/dev/null | grep -q "^$1"; }
for c in miri rust-src; do
  # One quiet try (works where rustup's server is reachable; fails fast where it is not).
  have "$c" || timeout 60 rustup component add --toolchain nightly "$c" >/dev/null 2>&1 || true
done
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
status=0
timed() { # timed NAME CMD...: runs CMD, prints how long it took, remembers a failure
  local t0=$SECONDS
  if "${@:2}"; then echo "$1: ok ($((SECONDS - t0)) s)"; else echo "$1: FAILED ($((SECONDS - t0)) s)"; status=1; fi
}

if [[ " $steps " == *" miri "* ]]; then
  step "miri: ring and preload tables"
  if have miri; then
    # Miri's own target dir (target/miri); isolation stays on (these tests touch no files).
    timed "miri ring" cargo +nightly miri test -q -p dftracer-core --lib ring::
    timed "miri tables" cargo +nightly miri test -q -p dftracer-preload --lib table::
  else
    echo "miri: skipped: the nightly toolchain has no miri component ($get)"
  fi
fi

# The sanitizers instrument std too (-Zbuild-std, needs rust-src): ThreadSanitizer reports
# false races on an uninstrumented std; AddressSanitizer runs without it (std unchecked).
# --target keeps the flags off build scripts and proc macros. Release: the 8x1M-event test.
sanitize() { # sanitize address|thread DIR [TEST-HARNESS ARGS...]
  local flags="-Zsanitizer=$1" std=()
  if have rust-src; then std=(-Zbuild-std); fi
  RUSTFLAGS="$flags" RUSTDOCFLAGS="$flags" cargo +nightly test -q "${std[@]}" --target "$host" \
    --release -p dftracer-core --test lifecycle --target-dir "$ROOT/target/$2" -- "${@:3}" 2>&1 | tail -n 30
}
for s in asan tsan; do
  [[ " $steps " == *" $s "* ]] || continue
  step "$s: core lifecycle tests"
  if ! have rust-src; then
    if [ "$s" = tsan ]; then
      echo "tsan: skipped: the nightly toolchain has no rust-src component (-Zbuild-std needs it; $get)"
      continue
    fi
    echo "asan: std itself not instrumented: no rust-src component ($get)"
  fi
  if [ "$s" = asan ]; then
    # Leak checking off: the tracer's process-wide state is never freed by design (a fork
    # child or a re-init leaks the previous copy), and scenarios exit from inside a test.
    ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" timed asan sanitize address asan
  else
    # halt_on_error: the first report fails the scenario process, and so the test.
    # die_after_fork=0: the fork scenarios' children start the tracer's writer thread, which
    # ThreadSanitizer refuses by default after a multi-threaded fork.
    # Skipped: the SIGTERM scenario idles in a sleep loop, where ThreadSanitizer (which
    # delivers signals at its own interception points) never hands it the signal: it hangs.
    TSAN_OPTIONS="halt_on_error=1:die_after_fork=0:${TSAN_OPTIONS:-}" timed tsan sanitize thread tsan \
      --skip sigterm_finishes_the_trace_and_dies_by_the_signal
  fi
done
exit "$status"
