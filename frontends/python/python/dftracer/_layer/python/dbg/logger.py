"""`dftracer.python.dbg.logger`: the names of `dftracer.python.logger` (pydftracer 2.0.6's
`dbg.logger`), each call of the tracer and of `dft_fn` written on stderr (see
`dftracer.python.dbg`); `profiler` is `dftracer.dftracer_dbg` when tracing is on."""

import dftracer.python.common as common
import importlib

_logger = importlib.import_module("dftracer.python.logger")  # the package attribute is the Logger
from dftracer.python.dbg._view import views

views(_logger, [n for n in _logger.__all__ if n not in ("common", "profiler")], globals())
if common.DFTRACER_ENABLE:
    import dftracer.dftracer_dbg as profiler
else:
    profiler = common.NoOpProfiler()

__all__ = list(_logger.__all__)
