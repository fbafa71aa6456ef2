"""`dftracer.python.dbg`: the annotation API of `dftracer.python` (and its `ai`, `dynamo` and
`torch` parts) with every call written on stderr, for debugging annotations (pydftracer's
`dftracer.python.dbg`).

    from dftracer.python.dbg import dftracer, dft_fn, ai

Every object here is the same object as in `dftracer.python`, seen through a `Logged` view:
calling it, one of its methods, entering or leaving it as a context manager writes one line
`[DFTRACER DEBUG]: [time] <call> -> <result>` on stderr and then does what `dftracer.python`
does; a function it decorates writes one line per call of that function. The trace is the
same as without `dbg`. `dftracer.dftracer_dbg` is the native module with the same logging.
"""

from __future__ import annotations

from typing import Any

import dftracer.python.dbg.ai  # noqa: F401  (before the star imports: `ai`, `logger` are
import dftracer.python.dbg.logger  # noqa: F401  the singleton and the Logger, as pydftracer's)
from dftracer.python.dbg._view import Logged
from dftracer.python.dbg.ai import *  # noqa: F401,F403
from dftracer.python.dbg.ai import __all__ as _ai_all
from dftracer.python.dbg.logger import *  # noqa: F401,F403
from dftracer.python.dbg.logger import __all__ as _logger_all

__all__ = list(dict.fromkeys(list(_ai_all) + list(_logger_all)))


def __getattr__(name: str) -> Any:
    # pydftracer's dbg package star-imports `dynamo` (and so imports torch at import time);
    # here its names are imported when first asked for.
    if name in ("dynamo", "Dynamo", "create_backend"):
        import importlib

        value = getattr(importlib.import_module("dftracer.python.dynamo"), name)
        view = Logged(value, name)
        globals()[name] = view
        return view
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
