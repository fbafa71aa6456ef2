"""`dftracer.python.logger`: pydftracer 2.0.6's `logger` module: every name of
`dftracer.python.common` (the tracer `dftracer`, `dft_fn`, ...), the `DFTRACER` stream logger
`logger`, the module `common`, and `profiler` (the native module `dftracer.dftracer` when
tracing is on, a `NoOpProfiler` otherwise).

    from dftracer.python.logger import dftracer, dft_fn
"""

import logging

import dftracer.python.common as common
from dftracer.python.common import *  # noqa: F401,F403
from dftracer.python.common import __all__ as _common_all
from dftracer.python.common import profiler  # noqa: F401
from dftracer.python.env import setup_stream_logger

#: The `DFTRACER` logger (stderr, at DFTRACER_LOG_LEVEL; ERROR by default).
logger: logging.Logger = setup_stream_logger()
if common.DFTRACER_ENABLE:
    logger.info("DFTracer was enabled.")

__all__ = list(_common_all) + ["logger", "common"]
