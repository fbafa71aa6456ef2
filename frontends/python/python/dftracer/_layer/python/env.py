"""`dftracer.python.env`: the environment settings pydftracer 2.0.6 reads at import.

`DFTRACER_ENABLE` is whether tracing is on in this process: `DFTRACER_ENABLE` (any of
`1/true/yes/on`) or the YAML config's `enable`, as the native module decides
(pydftracer: only the literal `DFTRACER_ENABLE=1`).
"""

from __future__ import annotations

import logging
import os

from dftracer import dftracer as _native

__all__ = [
    "DFTRACER_ENABLE_ENV",
    "DFTRACER_INIT_ENV",
    "DFTRACER_LOG_LEVEL_ENV",
    "DFTRACER_TIME_METRIC_ENV",
    "DFTRACER_ENABLE",
    "DFTRACER_INIT_PRELOAD",
    "DFTRACER_LOG_LEVEL",
    "setup_stream_logger",
]

DFTRACER_ENABLE_ENV = "DFTRACER_ENABLE"
DFTRACER_INIT_ENV = "DFTRACER_INIT"
DFTRACER_LOG_LEVEL_ENV = "DFTRACER_LOG_LEVEL"
DFTRACER_TIME_METRIC_ENV = "DFTRACER_TIME_METRIC"

#: True when tracing is on for this process (DFTRACER_ENABLE or the YAML `enable`).
DFTRACER_ENABLE: bool = _native.is_enabled()
#: True unless DFTRACER_INIT names another mode than PRELOAD (pydftracer's reading of it).
DFTRACER_INIT_PRELOAD: bool = os.getenv(DFTRACER_INIT_ENV, "PRELOAD") == "PRELOAD"
#: The level names pydftracer knows: ERROR (default), WARN, INFO, DEBUG.
DFTRACER_LOG_LEVEL: str = os.getenv(DFTRACER_LOG_LEVEL_ENV, "ERROR")

_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARN}


def _log_level() -> int:
    return _LEVELS.get(DFTRACER_LOG_LEVEL, logging.ERROR)


def setup_stream_logger() -> logging.Logger:
    """The `DFTRACER` logger, at `DFTRACER_LOG_LEVEL`, writing `[LEVEL] message` on stderr
    (one handler however often this is called; pydftracer added one per call)."""
    log = logging.getLogger("DFTRACER")
    log.setLevel(_log_level())
    if not any(getattr(h, "_dftracer", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        handler._dftracer = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    return log
