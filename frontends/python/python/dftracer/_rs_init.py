"""DFTracer (Rust implementation): `dftracer.dftracer` is the native module,
`dftracer.python` the annotation API (`dftracer`, `dft_fn`), `dftracer.logger` its
pydftracer 1.x import path.

The wheel also carries the native library (`lib/libdftracer_core.so`, the same file as
`lib/libdftracer_preload.so` and as `lib/libdftracer_core.so.4.3.0`, its SONAME and the
reference's, which programs linked against either need), its C/C++ headers and
pkg-config/CMake files; `paths()` or
`python -m dftracer <what>` tell where they are, e.g.
`LD_PRELOAD=$(python -m dftracer preload) DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD ./app`.

Where the Python layer lives. Packages such as DLIO depend on `pydftracer`, whose wheel
installs `dftracer/python/*.py`: installed next to ours it would overwrite our layer, and
uninstalling it later would delete the directory. So our layer is not in `dftracer/python`
but in `dftracer/_layer/python` (no file of pydftracer's has that path), and this package
searches `_layer` first: `import dftracer.python` is ours whatever was installed after or
removed since. `DFTRACER_PYTHON_LAYER=pydftracer` searches the package directory first
instead, so that pydftracer's own files (when present) run over our native module;
`python -m dftracer version` says which layer is active.
"""

import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_LAYER = _os.path.join(_HERE, "_layer")

#: "ours" or "pydftracer": which `dftracer.python` this process imports (see the docstring).
LAYER_CHOICE = "pydftracer" if _os.environ.get("DFTRACER_PYTHON_LAYER", "").strip().lower() == "pydftracer" else "ours"

# A namespace portion's __path__ may be a _NamespacePath: make it a list we own.
__path__ = [p for p in list(__path__) if _os.path.abspath(p) != _LAYER]  # noqa: F821
if LAYER_CHOICE == "ours":
    __path__.insert(0, _LAYER)
else:
    __path__.append(_LAYER)


def paths():
    """Where the wheel's native files are: {preload, lib, libdir, include, pkgconfig, cmake}."""
    libdir = _os.path.join(_HERE, "_native", "lib")
    return {
        "preload": _os.path.join(libdir, "libdftracer_preload.so"),
        "lib": _os.path.join(libdir, "libdftracer_core.so"),
        "libdir": libdir,
        "include": _os.path.join(_HERE, "_native", "include"),
        "pkgconfig": _os.path.join(libdir, "pkgconfig"),
        "cmake": _os.path.join(libdir, "cmake", "dftracer"),
    }


def _version():
    try:
        from importlib.metadata import version

        return version("dftracer-rs")
    except Exception:  # not installed as a distribution (source tree)
        return "unknown"


def layers():
    """Which Python layer is active and what else is installed: a dict with `active`
    ("ours" or "pydftracer"), `path` (the active `dftracer/python` directory), `ours` (our
    layer's directory), `pydftracer` (its installed version or None) and `pydftracer_path`
    (its `dftracer/python` directory when its files are present, else None)."""
    ours = _os.path.join(_LAYER, "python")
    theirs = _os.path.join(_HERE, "python")
    try:
        from importlib.metadata import version

        ref = version("pydftracer")
    except Exception:
        ref = None
    present = _os.path.isfile(_os.path.join(theirs, "__init__.py"))
    active = "pydftracer" if LAYER_CHOICE == "pydftracer" and present else "ours"
    return {
        "active": active,
        "path": theirs if active == "pydftracer" else ours,
        "ours": ours,
        "pydftracer": ref,
        "pydftracer_path": theirs if present else None,
    }


__version__ = _version()
