#!/usr/bin/env bash
# The native C-ABI library of dftracer-rs, under both of its names, and (with --prefix) the
# install layout C/C++ programs build against:
#
#   PREFIX/include/dftracer/dftracer.h
#   PREFIX/lib/libdftracer_core.so            (SONAME libdftracer_core.so; -ldftracer_core)
#   PREFIX/lib/libdftracer_preload.so -> libdftracer_core.so   (what LD_PRELOAD names)
#   PREFIX/lib/pkgconfig/dftracer.pc
#   PREFIX/lib/cmake/dftracer/dftracer-config.cmake, dftracer-config-version.cmake
#
# usage: scripts/native-lib.sh [--prefix DIR] [--target-dir DIR] [--debug] [--no-build]
#   default: cargo build --release -p dftracer-preload, then
#   target/release/libdftracer_core.so -> libdftracer_preload.so (same file, both names).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="" target_dir="${CARGO_TARGET_DIR:-$ROOT/target}" profile=release build=1
while (($#)); do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --target-dir) target_dir="$2"; shift 2 ;;
    --debug) profile=debug; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "native-lib.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ((build)); then
  flags=(); [ "$profile" = release ] && flags=(--release)
  (cd "$ROOT" && cargo build -q "${flags[@]}" -p dftracer-preload --target-dir "$target_dir")
fi
out="$target_dir/$profile"
so="$out/libdftracer_preload.so"
[ -f "$so" ] || { echo "native-lib.sh: $so missing (build first)" >&2; exit 1; }
ln -sf libdftracer_preload.so "$out/libdftracer_core.so"
[ -n "$prefix" ] || { echo "$out/libdftracer_core.so"; exit 0; }

crate_version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
api_version=2.2.0 # the DFTracer release whose C/C++ header ours is compatible with
pkg="$ROOT/frontends/preload/pkg"
subst() { sed -e "s/@CRATE_VERSION@/$crate_version/g" -e "s/@API_VERSION@/$api_version/g" \
              -e "s/@API_MAJOR@/${api_version%%.*}/g" "$1" > "$2"; }
mkdir -p "$prefix/include/dftracer" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/dftracer"
install -m 0644 "$ROOT/frontends/preload/include/dftracer/dftracer.h" "$prefix/include/dftracer/"
# One file, two names: a linked program that is also preloaded maps it once (SONAME match).
install -m 0755 "$so" "$prefix/lib/libdftracer_core.so"
ln -sf libdftracer_core.so "$prefix/lib/libdftracer_preload.so"
subst "$pkg/dftracer.pc.in" "$prefix/lib/pkgconfig/dftracer.pc"
subst "$pkg/dftracer-config.cmake.in" "$prefix/lib/cmake/dftracer/dftracer-config.cmake"
subst "$pkg/dftracer-config-version.cmake.in" "$prefix/lib/cmake/dftracer/dftracer-config-version.cmake"
echo "$prefix"
