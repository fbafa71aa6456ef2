# Sourced by the scripts: finds or installs the toolchains this project needs on a fresh
# machine (Debian + rustup image). Idempotent and quiet when everything is present.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
need_apt=()
command -v cargo >/dev/null 2>&1 || { echo "scripts/env.sh: cargo not found; installing rustup's stable toolchain (https://sh.rustup.rs)" >&2; need_apt+=(curl ca-certificates); }
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv python3-dev)
# Debian's python3 makes venvs only with python3-venv (it carries ensurepip).
command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip' 2>/dev/null && need_apt+=(python3-venv)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# The C/C++ API tests build the examples with g++, pkg-config and CMake.
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
if ((${#need_apt[@]})); then
  echo "scripts/env.sh: installing with apt-get: ${need_apt[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  # Debian's own rustc is older than the workspace's rust-version: rustup's stable instead.
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y -q --profile minimal >&2
fi
msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")"
have="$(rustc --version | cut -d' ' -f2)"
if [ "$(printf '%s\n%s\n' "$msrv" "$have" | sort -V | head -n1)" != "$msrv" ]; then
  echo "scripts/env.sh: rustc $have is older than the $msrv this workspace needs: rustup update stable" >&2
  exit 1
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  echo "scripts/env.sh: adding the rustfmt and clippy components (rustup)" >&2
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
PY="${PYTHON:-python3}"
# A venv with our wheel and the test tools, reused between runs.
venv() { # venv DIR PKGS...
  local dir="$1"; shift
  if [ ! -x "$dir/bin/python" ]; then "$PY" -m venv "$dir"; fi
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
}
