"""`dftracer.dftracer_dbg`: the native module's functions, each call written on stderr.

The reference ships a second build of its native module compiled with debug logging; this
implementation has one native module, so this module is not a separate build: it offers the
same functions as `dftracer.dftracer` (the reference's names plus our extras) and each one,
when called, writes one line on stderr

    [DFTRACER DEBUG]: [2026-01-31 12:00:00.123] log_event('step', 'train', 17, 3, ...) -> None

then does exactly what `dftracer.dftracer`'s function does (it calls it). `dftracer.python.dbg`
is the annotation API with the same logging. Nothing is written unless a function is called.
"""

import datetime as _dt
import functools as _functools
import reprlib as _reprlib
import sys as _sys

from dftracer import dftracer as _native

_repr = _reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80


def debug(message: str) -> None:
    """One `[DFTRACER DEBUG]` line on stderr (the reference's debug build's prefix)."""
    now = _dt.datetime.now().isoformat(sep=" ", timespec="milliseconds")
    try:
        _sys.stderr.write(f"[DFTRACER DEBUG]: [{now}] {message}\n")
    except Exception:  # a closed or broken stderr must never break the program
        pass


def describe(name: str, args: tuple, kwargs: dict) -> str:
    parts = [_repr.repr(a) for a in args] + [f"{k}={_repr.repr(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def logged(name: str, fn):
    """`fn`, writing its call and result (or exception) on stderr."""

    @_functools.wraps(fn)
    def call(*args, **kwargs):
        what = describe(name, args, kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            debug(f"{what} raised {type(exc).__name__}: {exc}")
            raise
        debug(f"{what} -> {_repr.repr(result)}")
        return result

    return call


# The reference's functions, then ours (see dftracer.pyi).
_NAMES = (
    "initialize", "get_time", "get_config", "enter_event", "exit_event", "log_event",
    "log_metadata_event", "set_app_metadata_int", "set_app_metadata_string", "mark_used",
    "finalize", "trace_path", "stats", "flush", "is_enabled", "_exit", "_before_exec", "_name_thread",
    "_int_layout",
)
for _name in _NAMES:
    globals()[_name] = logged(_name, getattr(_native, _name))
del _name
_Wrapped = _native._Wrapped
dft_fn = _native.dft_fn
_Tracer = _native._Tracer
__version__ = getattr(_native, "__version__", "unknown")
