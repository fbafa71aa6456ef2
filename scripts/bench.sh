#!/usr/bin/env bash
# Full overhead benchmarks (long; not part of `make test`): builds release artefacts, creates a
# venv with ours and one with the reference (dftracer==2.2.0 pydftracer==2.0.6 from PyPI), runs
# each workload with tracing off, ours and the reference in alternating rounds, prints tables
# of medians and ratios, and writes records under benches/record/.
source "$(dirname "$0")/env.sh"
cd "$ROOT"
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
cargo build -q --release -p dftracer-preload -p dftracer-service -p dftracer-examples
venv "$ROOT/.venv-bench" pip
"$ROOT/.venv-bench/bin/python" -m pip install -q --force-reinstall --no-deps "$ROOT/frontends/python"
venv "$ROOT/.venv-ref" dftracer==2.2.0 pydftracer==2.0.6 typing_extensions
mkdir -p benches/record

echo "== Python API: ns per call (off / ours / reference), callgrind instructions"
python3 benches/python/run.py --ours "$ROOT/.venv-bench" --ref "$ROOT/.venv-ref" \
  --rounds "${ROUNDS:-5}" --record benches/record/python.json

echo "== Python training-like loop (2,000 files x 64 KiB), with and without I/O interception"
python3 benches/python/train_loop.py --ours "$ROOT/.venv-bench" --ref "$ROOT/.venv-ref" \
  --preload "$ROOT/target/release/libdftracer_preload.so" --rounds "${ROUNDS:-5}" \
  --record benches/record/train_loop.json

echo "== PyTorch: small CNN, 4 DataLoader workers reading image files (torch from PyPI, once: ~2.9 GB)"
if [ ! -f "$ROOT/.venv-torch-site/torch/__init__.py" ]; then
  "$PY" -m pip install -q --disable-pip-version-check --target "$ROOT/.venv-torch-site.part" torch
  mv "$ROOT/.venv-torch-site.part" "$ROOT/.venv-torch-site"
fi
for v in .venv-torch .venv-torch-ref; do
  venv "$ROOT/$v" pip
  "$ROOT/$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' |
    xargs -I{} sh -c "echo '$ROOT/.venv-torch-site' > {}/dftracer-torch-site.pth"
done
"$ROOT/.venv-torch/bin/python" -m pip install -q --force-reinstall --no-deps "$ROOT/frontends/python"
"$ROOT/.venv-torch-ref/bin/python" -m pip install -q dftracer==2.2.0 pydftracer==2.0.6 typing_extensions
python3 benches/python/torch_cnn.py --ours "$ROOT/.venv-torch" --ref "$ROOT/.venv-torch-ref" \
  --rounds "${ROUNDS:-5}" --record benches/record/torch_cnn.json

echo "== LD_PRELOAD: pread / open+close"
DFT_REF_VENV="$ROOT/.venv-ref" bash benches/preload/run.sh "${ROUNDS:-5}"

echo "== service: CPU and RSS"
[ -f benches/service/run.sh ] && VENV="$ROOT/.venv-ref" bash benches/service/run.sh || echo "service bench failed"

echo "== instruction counts vs the committed record"
python3 benches/callgrind_check.py --python "$ROOT/.venv-bench/bin/python"
