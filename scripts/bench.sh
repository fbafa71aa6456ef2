#!/usr/bin/env bash
# Full overhead benchmarks (long; not part of `make test`): builds release artefacts, creates a
# venv with ours and one with the reference (dftracer==2.2.0 pydftracer==2.0.6 from PyPI), runs
# each workload with tracing off, ours and the reference in alternating rounds, prints tables
# of medians and ratios, and writes records under benches/record/.
#
#   scripts/bench.sh            the full run (ROUNDS=5 by default)
#   BENCH_QUICK=1 scripts/bench.sh
#                               every section once, tiny (one round, few calls, a short service
#                               run; no callgrind: `make test`'s callgrind step does that), the
#                               records in target/bench-quick/ (benches/record/ untouched); the
#                               PyTorch section only when .venv-torch-site is already there
#                               (`scripts/test.sh torch` installs it). What `make test` runs.
#   BENCH_WHEEL=path.whl        install that wheel of ours instead of building frontends/python
source "$(dirname "$0")/env.sh"
cd "$ROOT"
QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 0 ] && QUICK=""
if [ -n "$QUICK" ]; then
  ROUNDS=1 PREADS=${PREADS:-20000} OPENS=${OPENS:-2000} DURATION=${DURATION:-2} INTERVALS=${INTERVALS:-1000}
  export PREADS OPENS DURATION INTERVALS
  RECORD="$ROOT/target/bench-quick"
  calls=(--calls 2000 --no-callgrind)
else
  RECORD="$ROOT/benches/record"
  calls=()
  command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
fi
# The same packages as make test's build step (one feature set: no rebuild after it).
cargo build -q --release -p dftracer-preload -p dftracer-service -p dftracer-examples -p dftracer-cli
ours_into() { # VENV: our package, from BENCH_WHEEL or built from frontends/python
  "$1/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
    "${BENCH_WHEEL:-$ROOT/frontends/python}"
}
# numpy: train_loop.py times initialize_log with numpy imported.
venv "$ROOT/.venv-bench" pip numpy
ours_into "$ROOT/.venv-bench"
venv "$ROOT/.venv-ref" dftracer==2.2.0 pydftracer==2.0.6 typing_extensions numpy
mkdir -p "$RECORD"
sections=0 # sections that ran to the end (set -e: a failing one stops the run)

echo "== Python API: ns per call (off / ours / reference), callgrind instructions"
python3 benches/python/run.py --ours "$ROOT/.venv-bench" --ref "$ROOT/.venv-ref" \
  --rounds "${ROUNDS:-5}" "${calls[@]}" --record "$RECORD/python.json"
sections=$((sections + 1))

echo "== Python training-like loop (2,000 files x 64 KiB), with and without I/O interception"
python3 benches/python/train_loop.py --ours "$ROOT/.venv-bench" --ref "$ROOT/.venv-ref" \
  --preload "$ROOT/target/release/libdftracer_preload.so" --rounds "${ROUNDS:-5}" \
  --record "$RECORD/train_loop.json"
sections=$((sections + 1))

echo "== PyTorch: small CNN, 4 DataLoader workers reading image files (torch from PyPI, once: ~2.9 GB)"
if [ -n "$QUICK" ] && [ ! -f "$ROOT/.venv-torch-site/torch/__init__.py" ]; then
  echo "skipped (BENCH_QUICK): torch is not installed in .venv-torch-site (scripts/test.sh torch installs it)"
else
  if [ ! -f "$ROOT/.venv-torch-site/torch/__init__.py" ]; then
    "$PY" -m pip install -q --disable-pip-version-check --target "$ROOT/.venv-torch-site.part" torch
    mv "$ROOT/.venv-torch-site.part" "$ROOT/.venv-torch-site"
  fi
  for v in .venv-torch .venv-torch-ref; do
    venv "$ROOT/$v" pip
    "$ROOT/$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' |
      xargs -I{} sh -c "echo '$ROOT/.venv-torch-site' > {}/dftracer-torch-site.pth"
  done
  ours_into "$ROOT/.venv-torch"
  "$ROOT/.venv-torch-ref/bin/python" -m pip install -q dftracer==2.2.0 pydftracer==2.0.6 typing_extensions
  python3 benches/python/torch_cnn.py --ours "$ROOT/.venv-torch" --ref "$ROOT/.venv-torch-ref" \
    --rounds "${ROUNDS:-5}" --record "$RECORD/torch_cnn.json"
  sections=$((sections + 1))
fi

echo "== LD_PRELOAD: pread / open+close"
DFT_REF_VENV="$ROOT/.venv-ref" bash benches/preload/run.sh "${ROUNDS:-5}"
sections=$((sections + 1))

echo "== LD_PRELOAD: short processes (a traced cat from start to exit), ours and the reference"
if [ -n "$QUICK" ]; then sp=(--rounds 1 --procs 5 --no-callgrind); else sp=(--rounds "${ROUNDS:-5}" --procs 40); fi
python3 benches/preload/short_procs.py --lib "$ROOT/target/release/libdftracer_preload.so" \
  --ref-lib "$(ls "$ROOT"/.venv-ref/lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so)" \
  "${sp[@]}" --record "$RECORD/short_procs.json"
sections=$((sections + 1))

echo "== C/C++ API: one annotated region (macros of dftracer.h), ours and the reference's C header"
if [ -n "$QUICK" ]; then capi_calls=(--calls 100000); else capi_calls=(--calls 2000000); fi
python3 benches/c_api/run.py --lib "$ROOT/target/release/libdftracer_preload.so" \
  --ref-venv "$ROOT/.venv-ref" --rounds "${ROUNDS:-5}" "${capi_calls[@]}" --record "$RECORD/c_api.json"
sections=$((sections + 1))

echo "== service: CPU and RSS"
if ! VENV="$ROOT/.venv-ref" bash benches/service/run.sh; then
  echo "service bench failed"
  [ -z "$QUICK" ] || exit 1
else
  sections=$((sections + 1))
fi

echo "== library layers: a traced H5Dread and MPI_File_read_at against a traced pread (callgrind)"
if [ -n "$QUICK" ]; then
  echo "skipped (BENCH_QUICK: callgrind)"
else
  # h5py and mpi4py (its wheel's Open MPI build: Debian's openmpi-bin) in .venv-bench.
  command -v mpirun.openmpi >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null; }
  venv "$ROOT/.venv-bench" h5py mpi4py
  python3 benches/preload/layer_cost.py --python "$ROOT/.venv-bench/bin/python" --record "$RECORD/layer_cost.json"
  sections=$((sections + 1))
fi

if [ -n "$QUICK" ]; then
  echo "== instruction counts: skipped (BENCH_QUICK; make test's callgrind step checks them)"
  echo "records in $RECORD"
  echo "bench: $sections passed, 0 failed"
else
  echo "== instruction counts vs the committed record"
  python3 benches/callgrind_check.py --python "$ROOT/.venv-bench/bin/python"
fi
