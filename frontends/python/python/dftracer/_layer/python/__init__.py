"""`dftracer.python`: the annotation API of DFTracer, drop-in for pydftracer 2.0.6.

    from dftracer.python import dftracer, dft_fn
    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
    df = dft_fn("train")

    @df.log
    def step(epoch, step): ...

    with dft_fn("io", name="read_loop"):
        ...
    log.finalize()          # optional: exit, os._exit, SIGTERM all finish the trace

The modules are pydftracer's, with the same names in each: `env` (the DFTRACER_* settings),
`common` (`dftracer`, `dft_fn`, `TagValue`, the enums, `capture_signal`, ...), `logger`
(`common`'s names and the `DFTRACER` logger), `ai_common` (the AI tracer classes), `ai_init`
(the `ai` singleton), `ai` (both), `dynamo`, `torch` (`torch.common`, `torch.profiler`),
`dbg` (`dbg.logger`, `dbg.ai`, `dbg.torch`), `_version`. This package has every name of
`ai` and `logger` (so `from dftracer.python import ai` is the singleton, as in pydftracer)
and, when first asked for, `dynamo`, `Dynamo`, `create_backend` (pydftracer imports them
and so torch at import; `dynamo` is the tracer unless the submodule was imported first).

Differences from pydftracer (all deliberate, see FORMAT.md): decorators record the arguments
actually passed (never defaults over them, never leaking between functions) and work on
methods, properties, static/class methods, generators and coroutines; events logged before
`initialize_log` are kept; worker processes are traced with no user code; no signal handlers
are installed in Python (Ctrl-C still raises KeyboardInterrupt); no stray `dft.log`; with
tracing off a decorator returns the function itself. The hot paths (the decorator's wrapper,
the context manager, `log_event`) are native.
"""

from __future__ import annotations

from typing import Any

import dftracer.python.env as env
import dftracer.python.common as common
import dftracer.python.logger  # noqa: F401  (before the star import: `logger` is the Logger)
import dftracer.python.ai_common as ai_common
import dftracer.python.ai_init as ai_init
import dftracer.python.ai  # noqa: F401  (before the star import: `ai` is the singleton)

# The native `dft_fn` looks these up here (`dftracer.python._dft_fn_log`).
from dftracer.python.common import (  # noqa: F401
    CAPTURED,
    _dft_fn_iter,
    _dft_fn_log,
    _log,
    _parameters,
    _parameters_by_signature,
    _timed_iter,
)
from dftracer.python.ai import *  # noqa: F401,F403
from dftracer.python.ai import __all__ as _ai_all
from dftracer.python.logger import *  # noqa: F401,F403
from dftracer.python.logger import __all__ as _logger_all
from dftracer.python._version import __version__  # noqa: F401

__all__ = list(dict.fromkeys(list(_ai_all) + list(_logger_all) + ["env", "ai_init"]))


def __getattr__(name: str) -> Any:
    # pydftracer's package star-imports its `dynamo` module (`dynamo`, `Dynamo`,
    # `create_backend`), which imports torch: here they are imported when first asked for, so
    # `import dftracer.python` stays cheap. (`dynamo` is the tracer, as in pydftracer, unless
    # the submodule `dftracer.python.dynamo` was imported first.)
    if name in ("dynamo", "Dynamo", "create_backend"):
        import importlib

        value = getattr(importlib.import_module("dftracer.python.dynamo"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
