#!/usr/bin/env bash
# `make dist`: wheels a user installs without Rust, and the source distribution.
#
#   scripts/dist.sh [--out DIR] [--no-sdist] [--build-only | --check-only] [--check-sdist] [PYTHON...]
#
# (--build-only: the wheels, no checks; --check-only: check the wheels already in DIR, and make
# the sdist. scripts/test.sh's `wheel` step builds the running Python's wheel this way, its
# `dist` step checks it.)
# For each CPython given, or else each supported one found on this machine (3.9 to 3.13:
# pyenv's versions, then python3.X on PATH, /usr/bin, /usr/local/bin; free-threaded builds are
# skipped: the module is not claimed safe without the GIL), builds a manylinux_2_28 x86_64
# wheel with maturin and zig (`--zig --compatibility manylinux_2_28`: zig links every ELF
# file of the wheel, the extension module, libdftracer_core.so under its three names and the
# `dftracer` tool, against glibc 2.28's symbols, so the wheel installs on glibc 2.28 or newer,
# RHEL/Rocky 8 and later), into DIR (default dist/), plus the sdist (`maturin sdist`). Then
# checks each wheel: `auditwheel show` must find it consistent with manylinux_2_28_x86_64,
# and a fresh venv of its Python (target/dist-venvs/) installs it and runs
# tests/dist_smoke.py (import, a traced decorated function read back, the native files and
# their SONAME, the `dftracer` tool, LD_PRELOAD=$(python -m dftracer preload)).
# --check-sdist also builds a wheel from the sdist (a full compile, minutes) in a fresh venv
# and runs the same smoke test with it. Last line: `dist: N passed, N failed`.
#
# Tools (maturin, ziglang, auditwheel) come from PyPI into .venv-dist; `make clean` removes it.
source "$(dirname "$0")/env.sh"
cd "$ROOT"
out="$ROOT/dist" sdist=1 build=1 check=1 check_sdist=0 pythons=()
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-sdist) sdist=0; shift ;;
    --build-only) check=0; shift ;;
    --check-only) build=0; shift ;;
    --check-sdist) check_sdist=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "dist.sh: unknown option $1" >&2; exit 2 ;;
    *) pythons+=("$1"); shift ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# A supported, GIL-enabled CPython of minor version $2?
is_cpython() { # PYTHON [MINOR]
  "$1" -c 'import sys, sysconfig
m = int(sys.argv[1]) if len(sys.argv) > 1 else sys.version_info[1]
sys.exit(not (sys.implementation.name == "cpython" and sys.version_info[:2] == (3, m)
              and 9 <= m <= 13 and not sysconfig.get_config_var("Py_GIL_DISABLED")))' ${2:+"$2"} 2>/dev/null
}
if ((${#pythons[@]} == 0)); then
  pyenv_root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for m in 9 10 11 12 13; do
    found=""
    for c in "$pyenv_root"/versions/3."$m".*/bin/python3."$m" "$(command -v python3."$m" 2>/dev/null || true)" \
      /usr/bin/python3."$m" /usr/local/bin/python3."$m"; do
      [ -n "$c" ] && [ -x "$c" ] && is_cpython "$c" "$m" && { found="$c"; break; }
    done
    if [ -n "$found" ]; then pythons+=("$found"); else echo "dist: no CPython 3.$m found on this machine: no cp3$m wheel"; fi
  done
fi
((${#pythons[@]})) || { echo "dist: no supported CPython (3.9-3.13) found" >&2; exit 1; }
for py in "${pythons[@]}"; do
  is_cpython "$py" || { echo "dist: $py is not a supported GIL-enabled CPython 3.9-3.13" >&2; exit 2; }
done

tools="$ROOT/.venv-dist"
venv "$tools" 'maturin>=1.5,<2' ziglang auditwheel
export PATH="$tools/bin:$PATH" # maturin runs zig as `python3 -m ziglang` from this venv
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
tag_of() { "$1" -c 'import sys; print("cp%d%d" % sys.version_info[:2])'; }
wheel_of() { ls "$out"/dftracer_rs-"$version"-"$1"-"$1"-manylinux_2_28_x86_64.whl 2>/dev/null | head -n1; }

passed=0 failed=0
pass() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

if ((build)); then
  for py in "${pythons[@]}"; do
    tag="$(tag_of "$py")"
    rm -f "$out"/dftracer_rs-"$version"-"$tag"-*.whl
    echo "== building the $tag wheel ($py)"
    t0=$SECONDS
    # A new DFTRACER_NATIVE_REBUILD makes build.rs rerun: the native files it puts in the
    # package are this (zig-linked) build's, not those of the last build of another kind.
    if (cd frontends/python && DFTRACER_NATIVE_REBUILD="$tag-$(date +%s%N)" \
      maturin build --release --zig --compatibility manylinux_2_28 -i "$py" --out "$out"); then
      pass "$tag wheel built in $((SECONDS - t0)) s: $(basename "$(wheel_of "$tag")")"
    else
      fail "$tag wheel: maturin failed"
    fi
  done
fi
if ((sdist)); then
  rm -f "$out"/dftracer_rs-"$version".tar.gz
  if (cd frontends/python && maturin sdist --out "$out") >/dev/null 2>&1 && [ -f "$out/dftracer_rs-$version.tar.gz" ]; then
    # build.rs builds these from the sdist: the native library (its crate carries
    # native-lib.sh) and the dftracer tool.
    missing="" listing=""
    listing="$(tar tzf "$out/dftracer_rs-$version.tar.gz")"
    for f in frontends/preload/pkg/native-lib.sh frontends/preload/src/lib.rs frontends/cli/src/main.rs \
      frontends/python/build.rs core/src/lib.rs Cargo.lock; do
      grep -qx "dftracer_rs-$version/$f" <<<"$listing" || missing+=" $f"
    done
    if [ -z "$missing" ]; then pass "sdist dftracer_rs-$version.tar.gz"; else fail "sdist lacks$missing"; fi
  else
    fail "sdist: maturin sdist failed"
  fi
fi

smoke() { # LABEL PYTHON WHEEL-OR-SDIST
  local label="$1" py="$2" pkg="$3" v="$ROOT/target/dist-venvs/$1" log
  rm -rf "$v"
  "$py" -m venv "$v"
  log="$ROOT/target/dist-venvs/$label.log"
  if ! "$v/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$pkg" >"$log" 2>&1; then
    tail -n 30 "$log"
    fail "$label: pip install $(basename "$pkg") into a fresh venv"
    return
  fi
  # From a directory outside the clone: the installed package is what is imported.
  if (cd "$(mktemp -d)" && "$v/bin/python" "$ROOT/tests/dist_smoke.py"); then
    pass "$label: installed in a fresh venv, smoke test"
  else
    fail "$label: smoke test"
  fi
}

if ((check)); then
  for py in "${pythons[@]}"; do
    tag="$(tag_of "$py")"
    whl="$(wheel_of "$tag")"
    [ -n "$whl" ] || { fail "$tag: no manylinux_2_28 wheel in $out"; continue; }
    echo "== $(basename "$whl")"
    show="$(auditwheel show "$whl" 2>&1)" || true
    echo "$show" | tr '\n' ' ' | sed 's/  */ /g; s/^ //' | fold -s -w 100
    echo
    if tr '\n' ' ' <<<"$show" | grep -q 'consistent with the following platform tag: "manylinux_2_28_x86_64"'; then
      pass "$tag: auditwheel show: manylinux_2_28_x86_64"
    else
      fail "$tag: auditwheel show does not find manylinux_2_28_x86_64"
    fi
    # The native files, as auditwheel would never graft them (nothing to graft: no DT_NEEDED
    # outside glibc), under their names, and no file needing a newer glibc.
    names="$("$tools/bin/python" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")"
    n=dftracer/_native
    for f in $n/lib/libdftracer_core.so $n/lib/libdftracer_core.so.4.3.0 \
      $n/lib/libdftracer_preload.so $n/bin/dftracer $n/include/dftracer/dftracer.h \
      $n/lib/pkgconfig/dftracer.pc $n/lib/cmake/dftracer/dftracer-config.cmake \
      dftracer/_rs_init.py dftracer_rs.pth _dftracer_rs.py; do
      grep -qx "$f" <<<"$names" || fail "$tag: $f missing from the wheel"
    done
    if grep -q '\.libs/' <<<"$names"; then fail "$tag: the wheel has grafted libraries (.libs/)"; fi
    smoke "$tag" "$py" "$whl"
  done
  if ((check_sdist)); then
    sd="$out/dftracer_rs-$version.tar.gz"
    echo "== building a wheel from $(basename "$sd") (a full compile)"
    smoke "sdist-$(tag_of "${pythons[0]}")" "${pythons[0]}" "$sd"
  fi
fi
ls -l "$out" | sed -n '2,$p'
echo "dist: $passed passed, $failed failed"
((failed == 0))
