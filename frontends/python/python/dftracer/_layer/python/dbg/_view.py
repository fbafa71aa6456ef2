"""The `Logged` view behind `dftracer.python.dbg` (see its docstring)."""

from __future__ import annotations

import inspect
import types
from typing import Any

import dftracer.python.common as _common
from dftracer.dftracer import _Wrapped
from dftracer.dftracer import dft_fn as _Region  # the native region class
from dftracer.dftracer_dbg import debug, describe, logged
from dftracer.python.ai_common import _DFTracerAI


def _viewable(value: Any) -> bool:
    """Objects whose calls are logged too: the tracer, regions, ai tracers and their classes."""
    kinds = (_common.dftracer, _Region, _DFTracerAI)
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

    @property
    def __signature__(self) -> Any:
        """The target's signature (so inspect.signature shows its parameters)."""
        try:
            return inspect.signature(self._target)
        except (TypeError, ValueError):
            return None


def views(module: Any, names: Any, into: dict) -> None:
    """Puts `module`'s `names` into `into`: a `Logged` view of each tracer, region, ai
    tracer and their classes, the others as they are."""
    for name in names:
        if name in into:
            continue
        value = getattr(module, name)
        into[name] = Logged(value, name) if _viewable(value) else value
