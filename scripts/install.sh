#!/usr/bin/env bash
# `make install [PREFIX=/usr/local]`: the C/C++ install, no Python needed. Builds (release) the
# native library and the `dftracer` tool, then puts under PREFIX:
#   lib/libdftracer_core.so.4.3.0 (SONAME), lib/libdftracer_core.so, lib/libdftracer_preload.so
#   include/dftracer/dftracer.h, include/dftracer/core/common/*.h
#   lib/pkgconfig/dftracer.pc, lib/cmake/dftracer/dftracer-config{,-version}.cmake
#   bin/dftracer
# (frontends/preload/pkg/native-lib.sh makes the layout; its files are relocatable.)
#
#   scripts/install.sh PREFIX
source "$(dirname "$0")/env.sh"
prefix="${1:?usage: scripts/install.sh PREFIX}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
cd "$ROOT"
cargo build -q --release -p dftracer-preload -p dftracer-cli
bash frontends/preload/pkg/native-lib.sh --no-build --prefix "$prefix" >/dev/null
install -d "$prefix/bin"
install -m 0755 target/release/dftracer "$prefix/bin/dftracer"
echo "installed into $prefix:"
(cd "$prefix" && find lib/libdftracer_* lib/pkgconfig/dftracer.pc lib/cmake/dftracer include/dftracer bin/dftracer \
  -maxdepth 0 -print | sed 's/^/  /')
case ":${PKG_CONFIG_PATH:-}:$(pkg-config --variable pc_path pkg-config 2>/dev/null):" in
  *":$prefix/lib/pkgconfig:"*) ;;
  *) echo "pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs dftracer" ;;
esac
case "$prefix" in
  /usr|/usr/local) command -v ldconfig >/dev/null && ldconfig 2>/dev/null || true ;; # the loader's cache
  *) echo "run time: programs linked against it find it through -Wl,-rpath,$prefix/lib (or LD_LIBRARY_PATH)" ;;
esac
echo "CMake: find_package(dftracer) with -DCMAKE_PREFIX_PATH=$prefix (not needed when it is a system prefix)"
echo "LD_PRELOAD=$prefix/lib/libdftracer_preload.so DFTRACER_ENABLE=1 DFTRACER_DATA_DIR=... your-program"
