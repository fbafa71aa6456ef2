"""dftracer-rs's start-up hook (run by `dftracer_rs.pth` in site-packages): `import dftracer`
runs our package code (`dftracer/_rs_init.py`) even when another wheel (pydftracer 1.x, which
DLIO pins) wrote its own `dftracer/__init__.py` over ours, or `pip uninstall` of it deleted
the file. Only for the `dftracer` of this site-packages directory: one found earlier on
`sys.path` (a source tree, PYTHONPATH) is left alone."""

import os
import sys

try:  # already loaded at start-up (frozen): importing importlib.util would cost ~8 ms here
    from _frozen_importlib_external import PathFinder, spec_from_file_location
except ImportError:  # pragma: no cover - another implementation
    from importlib.machinery import PathFinder
    from importlib.util import spec_from_file_location

_PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dftracer")
_INIT = os.path.join(_PKG, "_rs_init.py")


class DftracerRsFinder:
    """A meta path finder for the one name `dftracer`."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "dftracer" or not os.path.isfile(_INIT):
            return None
        found = PathFinder.find_spec(name, path)
        where = list(found.submodule_search_locations or []) if found is not None else []
        if not any(os.path.abspath(p) == _PKG for p in where):
            return None
        if found.origin and os.path.dirname(os.path.abspath(found.origin)) != _PKG:
            return None  # another dftracer package earlier on sys.path
        return spec_from_file_location(name, _INIT, submodule_search_locations=[_PKG])

    @staticmethod
    def invalidate_caches():
        pass


if not any(type(f) is type and f.__name__ == "DftracerRsFinder" for f in sys.meta_path):
    sys.meta_path.insert(0, DftracerRsFinder)
