"""DFTracer (Rust implementation): `dftracer.dftracer` is the native module,
`dftracer.python` the annotation API (`dftracer`, `dft_fn`).

The wheel also carries the native library (`lib/libdftracer_core.so`, the same file as
`lib/libdftracer_preload.so` and as `lib/libdftracer_core.so.4.3.0`, its SONAME and the
reference's, which programs linked against either need), its C/C++ headers and
pkg-config/CMake files; `paths()` or
`python -m dftracer <what>` tell where they are, e.g.
`LD_PRELOAD=$(python -m dftracer preload) DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD ./app`.
"""

import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def paths():
    """Where the wheel's native files are: {preload, lib, libdir, include, pkgconfig, cmake}."""
    libdir = _os.path.join(_HERE, "lib")
    return {
        "preload": _os.path.join(libdir, "libdftracer_preload.so"),
        "lib": _os.path.join(libdir, "libdftracer_core.so"),
        "libdir": libdir,
        "include": _os.path.join(_HERE, "include"),
        "pkgconfig": _os.path.join(libdir, "pkgconfig"),
        "cmake": _os.path.join(libdir, "cmake", "dftracer"),
    }


def _version():
    try:
        from importlib.metadata import version

        return version("dftracer-rs")
    except Exception:  # not installed as a distribution (source tree)
        return "unknown"


__version__ = _version()
