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

import types
from typing import Any

import dftracer.python as _api
from dftracer.dftracer import _Wrapped
from dftracer.dftracer import dft_fn as _Region  # the native region class
from dftracer.dftracer_dbg import debug, describe, logged
from dftracer.python.ai import DFTracerAI


def _viewable(value: Any) -> bool:
    """Objects whose calls are logged too: the tracer, regions, ai tracers and their classes."""
    kinds = (_api.dftracer, _Region, DFTracerAI)
    return isinstance(value, kinds) or (isinstance(value, type) and issubclass(value, kinds))


def _decorated(label: str, fn: Any) -> Any:
    """A function returned by a decorator: each call logged."""
    name = f"{label}:{getattr(fn, '__qualname__', getattr(fn, '__name__', 'fn'))}"
    return logged(name, fn)


class Logged:
    """A view of `target` that writes every call made through it on stderr."""

    __slots__ = ("_target", "_label")

    def __init__(self, target: Any, label: str) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_label", label)

    def _result(self, label: str, args: tuple, result: Any) -> Any:
        if _viewable(result):
            return Logged(result, label)
        if args and callable(args[0]) and isinstance(result, (types.FunctionType, _Wrapped, staticmethod, classmethod)):
            return _decorated(label, result)  # a decorator's result
        return result

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        label = f"{self._label}.{name}"
        if _viewable(value):
            return Logged(value, label)
        if callable(value) and not isinstance(value, type):
            def call(*args: Any, **kwargs: Any) -> Any:
                result = logged(label, value)(*args, **kwargs)
                return self._result(label, args, result)

            return call
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = logged(self._label, self._target)(*args, **kwargs)
        return self._result(describe(self._label, args, kwargs) if isinstance(self._target, type) else self._label,
                            args, result)

    def __enter__(self) -> "Logged":
        debug(f"{self._label}.__enter__()")
        self._target.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        debug(f"{self._label}.__exit__({'' if exc[0] is None else exc[0].__name__})")
        return self._target.__exit__(*exc)

    def __iter__(self) -> Any:
        return iter(self._target)

    def __repr__(self) -> str:
        return f"<dbg {self._label}: {self._target!r}>"


dftracer = Logged(_api.dftracer, "dftracer")
dft_fn = Logged(_api.dft_fn, "dft_fn")
ai = Logged(_api.ai, "ai")
for _name in _api.__all__:
    if _name not in globals():
        _value = getattr(_api, _name)
        globals()[_name] = Logged(_value, _name) if _viewable(_value) else _value
del _name, _value

__all__ = list(_api.__all__)


def __getattr__(name: str) -> Any:
    # pydftracer's dbg package star-imports `dynamo` (and so imports torch at import time);
    # here its names are imported when first asked for.
    if name in ("dynamo", "Dynamo", "create_backend"):
        from dftracer.python import dynamo as module

        value = getattr(module, name)
        view = Logged(value, name)
        globals()[name] = view
        return view
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
