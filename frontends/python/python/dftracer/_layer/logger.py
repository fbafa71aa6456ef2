"""`dftracer.logger`: pydftracer 1.x's import path, still used by DLIO 2.0.0 and MLPerf
Storage's DLIO (`from dftracer.logger import dftracer, dft_fn, DFTRACER_ENABLE`).

Its names are pydftracer 1.x's (`dftracer`, `dft_fn`, `DFTRACER_ENABLE`,
`DFTRACER_INIT_PRELOAD`, `DFTRACER_LOG_LEVEL`, the `*_ENV` names, `capture_signal`,
`setup_logger`, `get_default_args`), served by this package's `dftracer.python`: the tracer is
the same singleton, events are recorded as `dftracer.python` records them. `dft_fn` takes
1.x's parameters: `log`, `log_init`, `log_static` take `f_py`, and `iter` also takes
`include_yield` and `include_iter`.

Deliberately unlike 1.x: arg values keep their type (1.x wrote every value as a string, as
2.x's typed args do not); decorators record the arguments actually passed (1.x merged the
defaults over them and recorded `step` as `image_size`); no signal handlers are installed.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from dftracer import dftracer as _native
from dftracer.python.common import (  # noqa: F401
    DFTRACER_ENABLE,
    DFTRACER_ENABLE_ENV,
    DFTRACER_INIT_ENV,
    DFTRACER_INIT_PRELOAD,
    DFTRACER_LOG_LEVEL,
    DFTRACER_LOG_LEVEL_ENV,
    _dft_fn_iter,
    _dft_fn_log,
    _timed_iter,
    capture_signal,
    dftracer,
    get_default_args,
    setup_logger,
)
from dftracer.python.common import dft_fn as _dft_fn

__all__ = [
    "DFTRACER_ENABLE_ENV",
    "DFTRACER_INIT_ENV",
    "DFTRACER_LOG_LEVEL_ENV",
    "DFTRACER_ENABLE",
    "DFTRACER_INIT_PRELOAD",
    "DFTRACER_LOG_LEVEL",
    "capture_signal",
    "setup_logger",
    "dftracer",
    "get_default_args",
    "dft_fn",
]

if DFTRACER_ENABLE:
    profiler = _native  # 1.x: the native module, when tracing is on


class dft_fn(_dft_fn):
    """`dftracer.python.dft_fn` with pydftracer 1.x's method parameters."""

    def log(self, f_py: Any = None, name: Optional[str] = None) -> Any:
        """Decorator: one event per call (see `dftracer.python.dft_fn.log`)."""
        return _dft_fn_log(self, f_py, name)

    def log_init(self, f_py: Any = None, name: Optional[str] = None) -> Any:
        """Decorator for `__init__`, as `log`."""
        return _dft_fn_log(self, f_py, name)

    def log_static(self, f_py: Any = None, name: Optional[str] = None) -> Any:
        """Decorator for static methods, as `log`."""
        return _dft_fn_log(self, f_py, name)

    def iter(self, func: Iterable, name: str = "loop", iter_name: str = "step",
             include_yield: bool = True, include_iter: bool = True) -> Iterator:
        """Yields the items of `func`, recording `<name>.iter` (waiting for each item; unless
        `include_iter` is false) and `<name>.yield` (the loop body; unless `include_yield`
        is false) with `<iter_name>` = 1, 2, ..."""
        if include_yield and include_iter:
            return _dft_fn_iter(self, func, name, iter_name)
        return self._iter_some(func, name, iter_name, include_yield, include_iter)

    def _iter_some(self, func: Iterable, name: str, iter_name: str, include_yield: bool,
                   include_iter: bool) -> Iterator:
        if not (_native.is_enabled() and self._enabled):
            yield from func
            return
        yield from _timed_iter(func, self.cat, self._args, f"{name}.iter" if include_iter else None,
                               f"{name}.yield" if include_yield else None, iter_name)
