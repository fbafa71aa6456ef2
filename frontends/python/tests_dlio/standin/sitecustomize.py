"""TEMPORARY stand-in for `dftracer.logger` (pydftracer 1.x's module path, which DLIO 2.0.0
imports: `from dftracer.logger import dftracer, dft_fn, DFTRACER_ENABLE`), used only while our
wheel has no such module. Without it DLIO 2.0.0 cannot even be imported: its fallback classes
(a bare `except:` around that import) take no positional argument, so its module-level
`Profile(MODULE_CONFIG)` raises TypeError.

The tests put this directory on PYTHONPATH of the DLIO run (and so of its spawned workers).
The finder is appended *last* to sys.meta_path: once the wheel ships `dftracer/logger.py`,
the normal path finder finds it first and this file does nothing. The test
`test_dlio_imports_our_dftracer_logger` fails while the stand-in is what DLIO gets; delete
this directory when `dftracer.logger` has landed.
"""

import importlib.abc
import importlib.util
import sys


class _LoggerStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name != "dftracer.logger":
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import dftracer.python as p

        module.dftracer = p.dftracer
        module.dft_fn = p.dft_fn
        module.DFTRACER_ENABLE = p.DFTRACER_ENABLE
        module.DFTRACER_STANDIN = True  # the test checks whether DLIO got this


sys.meta_path.append(_LoggerStandIn())
