#!/usr/bin/env bash
# The native C-ABI library of dftracer-rs, under each of its names, and (with --prefix) the
# install layout C/C++ programs build against:
#
#   PREFIX/include/dftracer/dftracer.h
#   PREFIX/include/dftracer/core/common/{constants,typedef,cpp_typedefs,enumeration}.h
#   PREFIX/lib/libdftracer_core.so.4.3.0      (the file; SONAME libdftracer_core.so.4.3.0, the
#                                              reference's: programs linked against either run)
#   PREFIX/lib/libdftracer_core.so -> libdftracer_core.so.4.3.0      (-ldftracer_core)
#   PREFIX/lib/libdftracer_preload.so -> libdftracer_core.so.4.3.0   (what LD_PRELOAD names)
#   PREFIX/lib/pkgconfig/dftracer.pc                        (Version: 4.3.0)
#   PREFIX/lib/cmake/dftracer/dftracer-config.cmake, dftracer-config-version.cmake  (4.3.0)
#
# usage: scripts/native-lib.sh [--prefix DIR] [--target-dir DIR] [--debug] [--no-build]
#   default: cargo build --release -p dftracer-preload, then in target/release
#   libdftracer_core.so and libdftracer_core.so.4.3.0 -> libdftracer_preload.so (one file).
# (This file lives in the preload crate, so that the Python package's source distribution,
# which carries that crate, carries it too: frontends/python/build.rs runs it. `make native`,
# `make install` and scripts/native-lib.sh run it from the clone.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
prefix="" target_dir="${CARGO_TARGET_DIR:-$ROOT/target}" profile=release build=1
while (($#)); do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --target-dir) target_dir="$2"; shift 2 ;;
    --debug) profile=debug; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
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
# The SONAME (frontends/preload/build.rs) and the version of the package files: the
# reference DFTracer 2.2.0's native library and CMake package are version 4.3.0.
soname=libdftracer_core.so.4.3.0
ln -sf libdftracer_preload.so "$out/libdftracer_core.so"
ln -sf libdftracer_preload.so "$out/$soname"
[ -n "$prefix" ] || { echo "$out/libdftracer_core.so"; exit 0; }

crate_version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
api_version="${soname#libdftracer_core.so.}" # 4.3.0: the reference's package version
pkg="$ROOT/frontends/preload/pkg"
subst() { sed -e "s/@CRATE_VERSION@/$crate_version/g" -e "s/@API_VERSION@/$api_version/g" \
              -e "s/@API_MAJOR@/${api_version%%.*}/g" -e "s/@SONAME@/$soname/g" "$1" > "$2"; }
inc="$ROOT/frontends/preload/include"
mkdir -p "$prefix/include/dftracer/core/common" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/dftracer"
install -m 0644 "$inc/dftracer/dftracer.h" "$prefix/include/dftracer/"
install -m 0644 "$inc"/dftracer/core/common/*.h "$prefix/include/dftracer/core/common/"
# One file, three names: a linked program that is also preloaded maps it once (SONAME match).
# (A name that was the file in an older layout is replaced, not written through.)
rm -f "$prefix/lib/$soname" "$prefix/lib/libdftracer_core.so" "$prefix/lib/libdftracer_preload.so"
install -m 0755 "$so" "$prefix/lib/$soname"
ln -s "$soname" "$prefix/lib/libdftracer_core.so"
ln -s "$soname" "$prefix/lib/libdftracer_preload.so"
subst "$pkg/dftracer.pc.in" "$prefix/lib/pkgconfig/dftracer.pc"
subst "$pkg/dftracer-config.cmake.in" "$prefix/lib/cmake/dftracer/dftracer-config.cmake"
subst "$pkg/dftracer-config-version.cmake.in" "$prefix/lib/cmake/dftracer/dftracer-config-version.cmake"
echo "$prefix"
