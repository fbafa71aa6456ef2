#!/usr/bin/env bash
# The whole test suite (what CI runs), as named steps. Each step's output goes to
# target/test-logs/<step>.log; the terminal shows each step as it starts, cargo's progress,
# a heartbeat when a step is quiet, the step's counts and duration, and at the end one line
# `N passed, N failed[, N skipped]`. Every step runs even when one fails; the exit status
# is non-zero when any failed, and a failed step's failures and last lines are printed.
#
#   scripts/test.sh                 every step
#   scripts/test.sh GROUP|STEP ...  only those (groups below: lint rust loom fuzz python docs
#                                   dist install callgrind ecosystem torch dlio multinode
#                                   perfetto bench), with the setup steps they need
#
# Installs what is missing: rustfmt/clippy (rustup), gcc, g++, make, pkg-config, cmake
# (scripts/env.sh) and valgrind (apt-get); venvs .venv-utils (dftracer-utils 0.0.14) and
# .venv-test (pytest, numpy, h5py, mpi4py, our wheel), .venv-dist (maturin, ziglang, auditwheel: the wheel
# step's manylinux build), .venv-bench and .venv-ref (the bench step) from PyPI; for the torch
# and dlio steps torch (.venv-torch-site), .venv-torch, .venv-dlio (DLIO 2.0.0) and
# openmpi-bin and mpich (apt-get). `make clean` removes all of it.
source "$(dirname "$0")/env.sh"
source "$ROOT/scripts/steps.sh"
cd "$ROOT"
T0=$SECONDS
SELECTED=("$@")

# step NAME GROUPS PARSER TITLE CMD...: runs the step when nothing or one of GROUPS (comma
# separated) or NAME was selected. PARSER: see scripts/steps.sh (cargo, pytest, summary:WORD, -).
declare -A MATCHED=()
step() {
  local name="$1" groups=",$2," sel run=1
  shift 2
  ((${#SELECTED[@]})) && run=0
  for sel in "${SELECTED[@]}"; do
    if [ "$sel" = "$name" ] || [[ "$groups" == *",$sel,"* ]]; then
      MATCHED[$sel]=1 run=1
    fi
  done
  ((run)) && run_step "$name" "$@"
  return 0
}

# Steps of more than one command.
export DFTRACER_VALIDATE="$ROOT/.venv-utils/bin/dftracer_validate"
utils_venv() { venv "$ROOT/.venv-utils" dftracer-utils==0.0.14; }
build_wheel() {
  # mpi4py's wheel holds a build per MPI ABI (Open MPI's, MPICH's): test_mpiio.py runs it on both.
  venv "$ROOT/.venv-test" pytest numpy h5py mpi4py
  # test_mpiio.py's MPIs: Debian's Open MPI and MPICH (installed once; the dlio and multinode
  # steps use them too).
  local need=() p
  for p in mpirun.openmpi:openmpi-bin mpirun.mpich:mpich; do
    command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
  done
  if ((${#need[@]})); then
    echo "installing ${need[*]} with apt-get (the MPI-IO tests run two ranks under mpirun)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  rm -rf "$ROOT/target/wheels"
  # The wheel `make dist` ships (manylinux_2_28, maturin + zig), for this venv's Python: the
  # steps after this one test what users install. (maturin's cargo output is the progress.)
  bash "$ROOT/scripts/dist.sh" --build-only --no-sdist --out "$ROOT/target/wheels" "$ROOT/.venv-test/bin/python"
  "$ROOT/.venv-test/bin/python" -m pip install --disable-pip-version-check --force-reinstall \
    --no-deps "$ROOT"/target/wheels/*.whl
}
# make dist's checks of that wheel (auditwheel show, a fresh venv, tests/dist_smoke.py) and
# its sdist (made and its contents checked; --check-sdist builds from it: minutes, not here).
run_dist() { bash "$ROOT/scripts/dist.sh" --check-only --out "$ROOT/target/wheels" "$ROOT/.venv-test/bin/python"; }
# make install into a temporary prefix, then the C API tests (CMake find_package, pkg-config,
# the install layout, C and C++ programs linked against it) on that prefix.
run_install() {
  local p="$ROOT/target/install-test"
  rm -rf "$p"
  make -s -C "$ROOT" install PREFIX="$p"
  [ -x "$p/bin/dftracer" ] && "$p/bin/dftracer" --version
  DFT_INSTALL_PREFIX="$p" cargo test --release --workspace --no-fail-fast --test capi -- \
    cmake_find_package install_layout c_example cpp_example
}
# make bench, tiny: every section once (scripts/bench.sh, BENCH_QUICK), with the wheel step's
# wheel and records in target/bench-quick/.
run_bench_quick() { BENCH_QUICK=1 BENCH_WHEEL="$(ls "$ROOT"/target/wheels/*.whl | head -n 1)" bash "$ROOT/scripts/bench.sh"; }
# PyTorch from PyPI, installed once (the first run downloads about 2.9 GB of wheels, 5.3 GB on
# disk) into .venv-torch-site, which .venv-torch (pytest, numpy, our wheel) and
# .venv-torch-ref (the reference dftracer 2.2.0 + pydftracer 2.0.6, for the bench) both see
# through a .pth file.
torch_site() {
  [ -f "$ROOT/.venv-torch-site/torch/__init__.py" ] && return 0
  local t0=$SECONDS
  echo "installing torch from PyPI into .venv-torch-site (the first time: about 2.9 GB to download)"
  rm -rf "$ROOT/.venv-torch-site.part"
  # pip holds the downloaded wheels and the installed tree at once: about 8.5 GB at the peak.
  local free
  free=$(df -Pk "$ROOT" | awk 'NR == 2 { print int($4 / 1048576) }')
  echo "free disk where torch goes: ${free} GiB (the install needs about 9 GiB at its peak)"
  if ! "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir \
    --target "$ROOT/.venv-torch-site.part" torch; then
    rm -rf "$ROOT/.venv-torch-site.part"
    echo "torch could not be installed (free disk before: ${free} GiB; see pip's error above)"
    return 1
  fi
  mv "$ROOT/.venv-torch-site.part" "$ROOT/.venv-torch-site"
  echo "torch installed in $((SECONDS - t0)) s"
}
torch_venv() { # DIR PKGS...: a venv that also sees .venv-torch-site
  venv "$@"
  local site
  site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$ROOT/.venv-torch-site" >"$site/dftracer-torch-site.pth"
}
run_torch() {
  torch_site
  torch_venv "$ROOT/.venv-torch" pytest numpy
  "$ROOT/.venv-torch/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall \
    --no-deps "$ROOT"/target/wheels/*.whl
  DFT_WHEEL="$(ls "$ROOT"/target/wheels/*.whl | head -n 1)" DFT_TORCH_SITE="$ROOT/.venv-torch-site" \
    "$ROOT/.venv-torch/bin/python" -m pytest -q -p no:cacheprovider frontends/python/tests_torch
}
# DLIO benchmark 2.0.0 (MLPerf Storage's I/O benchmark) from PyPI in .venv-dlio, made once and
# reused: the package without its declared dependencies (tensorflow, nvidia-dali, torchvision,
# torchaudio, pydftracer), then what a CPU pytorch/npz workload imports when it runs:
# hydra-core (omegaconf, PyYAML), numpy, pandas and psutil (its stats), mpi4py (it calls
# MPI.Init even for one process: Debian's Open MPI), tensorflow-cpu (main.py imports its
# TensorBoard profiler, which imports tensorflow, whatever the workload: about 1.4 GB), torch
# from .venv-torch-site (the .pth file of torch_venv); our wheel last.
dlio_setup() {
  torch_site
  if ! command -v mpirun.openmpi >/dev/null 2>&1; then
    echo "installing openmpi-bin with apt-get (DLIO initialises MPI through mpi4py)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null
  fi
  torch_venv "$ROOT/.venv-dlio" pytest numpy hydra-core pandas psutil mpi4py tensorflow-cpu
  local pip=("$ROOT/.venv-dlio/bin/python" -m pip install -q --disable-pip-version-check --no-deps)
  "${pip[@]}" dlio-benchmark==2.0.0
  "${pip[@]}" --force-reinstall "$ROOT"/target/wheels/*.whl
}
run_dlio() {
  dlio_setup
  DFT_WHEEL="$(ls "$ROOT"/target/wheels/*.whl | head -n 1)" \
    "$ROOT/.venv-dlio/bin/python" -m pytest -q -p no:cacheprovider frontends/python/tests_dlio
}
run_callgrind() {
  if ! command -v valgrind >/dev/null; then
    echo "installing valgrind with apt-get (the instruction-count check needs it)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
  fi
  python3 benches/callgrind_check.py --python "$ROOT/.venv-test/bin/python"
}
multinode_setup() { # Debian's Slurm, munge, Open MPI and MPICH; mpi4py's wheel in .venv-test
  local need=() p
  for p in slurmctld:slurm-wlm munged:munge mpirun.openmpi:openmpi-bin mpirun.mpich:mpich unshare:util-linux; do
    command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
  done
  if ((${#need[@]})); then
    echo "installing with apt-get: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  # mpi4py's wheel carries builds for both MPI ABIs (Open MPI's libmpi.so.40, MPICH's
  # libmpi.so.12); building it from source against one MPICH takes minutes.
  venv "$ROOT/.venv-test" mpi4py
  venv "$ROOT/.venv-dfa" dftracer-analyzer dftracer-utils==0.0.12
}
run_multinode() { multinode_setup && run_pytest tests/multinode "$@"; }
run_pytest() { # the wheel built by the `wheel` step: the compatibility tests install it in a venv
  DFT_WHEEL="$(ls "$ROOT"/target/wheels/*.whl | head -n 1)"
  export DFT_WHEEL
  "$ROOT/.venv-test/bin/python" -m pytest -q -p no:cacheprovider "$@"
}

# The steps, in order: one line each. A step with environment variables uses env (see loom).
# A runner other than cargo or pytest prints `WORD: N passed, N failed` and uses summary:WORD.
# NAME      GROUPS                          PARSER            TITLE / COMMAND
step fmt    lint                            -                 "cargo fmt --check" cargo fmt --all -- --check
step clippy lint                            -                 "clippy -D warnings (release, all targets)" cargo clippy --workspace --all-targets --release -- -D warnings
step doc    lint                            -                 "cargo doc -D warnings (private items too: the docs are for contributors)" env RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" cargo doc --workspace --no-deps --document-private-items
step utils  rust,docs,ecosystem,torch,dlio,multinode -       "dftracer-utils 0.0.14 from PyPI in .venv-utils (tests validate traces with it)" utils_venv
step build  rust,docs,callgrind,ecosystem,perfetto,multinode -             "release build: preload library, service, examples" cargo build --release -p dftracer-preload -p dftracer-service -p dftracer-examples -p dftracer-cli
step rust   rust                            cargo             "Rust unit and integration tests (release: the 8x1M-event test is real)" cargo test --workspace --release --no-fail-fast
step loom   rust,loom                       cargo             "loom: the ring and the clock's seqlock under every interleaving (own target dir: --cfg loom)" env RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" cargo test --release -p dftracer-core --test loom --target-dir "$ROOT/target/loom"
step fuzz   fuzz                            cargo             "fuzz targets: replay seeds + bounded random inputs on stable" cargo test --release --no-fail-fast --manifest-path fuzz/Cargo.toml
step wheel  python,docs,callgrind,ecosystem,torch,dlio,multinode,dist,bench - "Python wheel (make dist's manylinux_2_28 build) installed in .venv-test with pytest, numpy, h5py, mpi4py (and openmpi-bin, mpich)" build_wheel
step dist   dist                            summary:dist      "make dist's checks: auditwheel show, fresh-venv smoke test of the wheel; the sdist" run_dist
step install install                        cargo             "make install into target/install-test; C API tests (CMake, pkg-config, linked programs) on it" run_install
step python python                          pytest            "Python frontend: pytest" run_pytest frontends/python/tests
step docs   docs                            pytest            "every README's python and sh blocks, run" run_pytest tests/test_readme_snippets.py
step callgrind callgrind                    summary:callgrind "instruction counts (callgrind) vs benches/record/callgrind.json" run_callgrind
step ecosystem ecosystem                    summary:ecosystem "dftracer-utils 0.0.14 reads our traces" bash tests/ecosystem.sh
step torch  torch                           pytest            "PyTorch (CPU, from PyPI, once into .venv-torch-site): DataLoader workers, torch.compile, profiler" run_torch
step dlio   dlio                            pytest            "DLIO benchmark 2.0.0 (PyPI, once into .venv-dlio; torch from .venv-torch-site): generation, training with DataLoader workers, checkpoints, read back" run_dlio
step multinode multinode                    pytest            "Slurm (2 nodes), Open MPI and MPICH, nodes as UTS namespaces: service and traced job, read back" run_multinode
step perfetto perfetto                      summary:perfetto  "dftracer perfetto output (ours and the reference's) in the Perfetto UI, headless Chromium" bash tests/perfetto.sh
step bench  bench                           summary:bench     "make bench, tiny (BENCH_QUICK=1: one round of each section; records in target/bench-quick)" run_bench_quick

unknown=0
for sel in "${SELECTED[@]}"; do
  if [ -z "${MATCHED[$sel]:-}" ]; then
    echo "scripts/test.sh: no step or group named '$sel' (steps and groups: the list at the end of scripts/test.sh)"
    unknown=1
  fi
done

# Where the space went (a clone grows to about 2.3 GB): `make clean` removes all of it.
echo
echo "disk: $(du -sh target fuzz/target .venv-* 2>/dev/null | awk '{ printf "%s%s %s", sep, $2, $1; sep = ", " }') (make clean removes them)"
rc=0
steps_total "$T0" || rc=1
((unknown)) && exit 2
exit "$rc"
