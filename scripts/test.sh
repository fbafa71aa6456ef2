#!/usr/bin/env bash
# The whole test suite (what CI runs). `scripts/test.sh lint` runs only the lints.
source "$(dirname "$0")/env.sh"
cd "$ROOT"
step() { echo; echo "=== $*"; }

step "lint: cargo fmt --check, clippy -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -q -- -D warnings
[ "${1:-}" = lint ] && exit 0

step "dftracer-utils 0.0.14 from PyPI (the service tests validate their traces with it)"
venv "$ROOT/.venv-utils" dftracer-utils==0.0.14
export DFTRACER_VALIDATE="$ROOT/.venv-utils/bin/dftracer_validate"

step "rust: unit and integration tests (release: the 8x1M-event test is real)"
cargo build --release -q -p dftracer-preload -p dftracer-service -p dftracer-examples
cargo test --workspace --release -q 2>&1 | tail -n 60

step "loom: the ring (producer/consumer) and the clock's seqlock under every interleaving"
# Its own target dir: --cfg loom would otherwise invalidate the main build.
t0=$SECONDS
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
  cargo test --release -q -p dftracer-core --test loom --target-dir "$ROOT/target/loom" 2>&1 | tail -n 5
echo "loom: $((SECONDS - t0)) s (build included)"

step "fuzz targets: replay seeds + bounded random inputs on stable"
cargo test --release -q --manifest-path fuzz/Cargo.toml 2>&1 | tail -n 20

step "python frontend: build the wheel, run pytest"
venv "$ROOT/.venv-test" pytest numpy
rm -rf "$ROOT/target/wheels"
"$ROOT/.venv-test/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$ROOT/target/wheels" "$ROOT/frontends/python"
DFT_WHEEL="$(ls "$ROOT"/target/wheels/*.whl)"
export DFT_WHEEL
"$ROOT/.venv-test/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$DFT_WHEEL"
"$ROOT/.venv-test/bin/python" -m pytest -q frontends/python/tests

step "instruction counts (callgrind) vs benches/record/callgrind.json"
command -v valgrind >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
python3 benches/callgrind_check.py --python "$ROOT/.venv-test/bin/python"

step "ecosystem: dftracer-utils 0.0.14 reads our traces"
bash tests/ecosystem.sh

step "perfetto: dftracer perfetto output (ours and the reference's) in the Perfetto UI, headless Chromium"
bash tests/perfetto.sh
