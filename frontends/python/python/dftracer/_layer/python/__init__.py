"""`dftracer.python`: the annotation API of DFTracer, drop-in for pydftracer 2.0.6.

    from dftracer.python import dftracer, dft_fn
    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
    df = dft_fn("train")

    @df.log
    def step(epoch, step): ...

    with dft_fn("io", name="read_loop"):
        ...
    log.finalize()          # optional: exit, os._exit, SIGTERM all finish the trace

Differences from pydftracer (all deliberate, see FORMAT.md): decorators record the arguments
actually passed (never defaults over them, never leaking between functions) and work on
methods, properties, static/class methods, generators and coroutines; events logged before
`initialize_log` are kept; worker processes are traced with no user code; no signal handlers
are installed in Python (Ctrl-C still raises KeyboardInterrupt); no stray `dft.log`.
The hot paths (the decorator's wrapper, the context manager, `log_event`) are native.
"""

from __future__ import annotations

import builtins
import enum
import functools
import inspect
import os
import sys
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar

from dftracer import dftracer as _native
from dftracer.dftracer import _Tracer, _Wrapped

__all__ = [
    "DFTRACER_ENABLE",
    "dftracer",
    "dft_fn",
    "TagValue",
    "TagType",
    "TagDType",
    "EntityStore",
    "EntityRole",
    "EntityRelation",
    "get_time_scale",
    "capture_signal",
    "NoOpProfiler",
]

#: True when tracing is on for this process (DFTRACER_ENABLE or the YAML `enable`).
DFTRACER_ENABLE: bool = _native.is_enabled()

#: Parameters a decorated function's call records (as the reference does).
CAPTURED = ("epoch", "step", "image_idx", "image_size")

F = TypeVar("F", bound=Callable[..., Any])


class TagType(enum.IntEnum):
    KEY = 0
    VALUE = 1
    IGNORE = 2


class TagDType(enum.Enum):
    INT = "int"
    FLOAT = "float"
    STRING = "string"


class EntityStore(enum.Enum):
    FILE = "file"
    MEMORY = "memory"
    NETWORK = "network"


class EntityRole(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"


class EntityRelation(enum.Enum):
    USES = "uses"
    GENERATES = "generates"


class TagValue:
    """A tagged arg value: `TagValue(5, TagDType.INT).value() == (0, 5)`."""

    __slots__ = ("_value", "dtype", "tag_type")

    def __init__(self, value: Any, dtype: TagDType = TagDType.STRING, tag_type: TagType = TagType.KEY):
        self._value = value
        self.dtype = dtype
        self.tag_type = tag_type

    def value(self) -> tuple:
        return (int(self.tag_type), self._value)


def get_time_scale() -> int:
    """Time units per second of the configured `DFTRACER_TIME_METRIC`."""
    metric = (_native.get_config("TIME_METRIC") or "US").upper()
    return {"NS": 1_000_000_000, "US": 1_000_000, "MS": 1_000, "SEC": 1}.get(metric, 1_000_000)


def capture_signal(signal_number: int, frame: Any = None) -> None:
    """pydftracer's signal handler, for code that installs it explicitly: finish the trace,
    then exit with the signal number."""
    _native.finalize()
    sys.exit(signal_number)


class NoOpProfiler:
    """Does nothing, as a context manager and as a decorator."""

    def __enter__(self) -> "NoOpProfiler":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __call__(self, func: F) -> F:
        return func


def _split(args: dict) -> tuple:
    ints, floats, strings = {}, {}, {}
    for k, v in args.items():
        if v is None:
            continue
        if isinstance(v, (bool, int)):
            ints[k] = int(v)
        elif isinstance(v, float):
            floats[k] = v
        else:
            strings[k] = str(v)
    return ints, strings, floats


def _log(name: str, cat: str, t0: int, args: dict) -> None:
    ints, strings, floats = _split(args)
    t1 = _native.get_time()
    _native.log_event(name, cat, t0, max(t1 - t0, 0), ints, strings, floats)


def _timed_iter(iterable: Iterable, cat: str, args: dict, wait_name: Optional[str],
                body_name: Optional[str], count_key: str) -> Iterator:
    """Yields the items of `iterable`, recording `wait_name` (getting each item) and
    `body_name` (the caller's loop body) with `count_key` = 1, 2, ...; `args` is read at each
    event, so updates made inside the loop are recorded. A `None` name records nothing."""
    it = builtins.iter(iterable)
    count = 1
    while True:
        t0 = _native.get_time()
        try:
            item = next(it)
        except StopIteration:
            return
        if wait_name:
            _log(wait_name, cat, t0, {**args, count_key: count})
        t1 = _native.get_time()
        yield item
        if body_name:
            _log(body_name, cat, t1, {**args, count_key: count})
        count += 1


class dftracer(_Tracer):
    """The process's tracer (pydftracer's singleton class). `log_event(name, cat, start_time,
    duration, int_args=None, float_args=None, string_args=None, relations=None)` is native
    (`_Tracer`): no Python frame per event."""

    __instance: Optional["dftracer"] = None

    def __init__(self) -> None:
        self.logger: Any = None
        self.start_time: int = 0
        self._used: set = set()

    @classmethod
    def get_instance(cls) -> "dftracer":
        if cls.__instance is None:
            cls.__instance = cls()
        return cls.__instance

    @staticmethod
    def initialize_log(logfile: Any = None, data_dir: Any = None, process_id: Any = -1) -> "dftracer":
        """Starts tracing to `<logfile minus extension>-<hash>-app.pfw.gz` (or
        `DFTRACER_LOG_FILE`, else `./trace`), creating the parent directory."""
        inst = dftracer.get_instance()
        if logfile is not None:
            logfile = os.fspath(logfile)
            if not isinstance(logfile, str):
                raise TypeError("initialize_log(): logfile must be a str or path")
            parent = os.path.dirname(os.path.abspath(logfile))
            if _native.is_enabled() and parent:
                os.makedirs(parent, exist_ok=True)
        if data_dir is not None and not isinstance(data_dir, str):
            data_dir = os.fspath(data_dir)
        pid = process_id if isinstance(process_id, int) else -1
        _native.initialize(logfile, data_dir, pid)
        inst.logger = _native
        inst.start_time = _native.get_time()
        inst.mark_used("python_function")
        return inst

    def get_time(self) -> int:
        return _native.get_time()

    def get_config(self, key: str) -> str:
        return _native.get_config(key)

    def enter_event(self) -> int:
        return _native.enter_event()

    def exit_event(self) -> None:
        _native.exit_event()

    def log_metadata_event(self, key: str, value: Any) -> None:
        _native.log_metadata_event(key, value)

    def set_app_metadata_int(self, key: str, value: int) -> None:
        _native.set_app_metadata_int(key, value)

    def set_app_metadata_string(self, key: str, value: str) -> None:
        _native.set_app_metadata_string(key, value)

    def mark_used(self, name: str) -> None:
        if name not in self._used:
            self._used.add(name)
            _native.mark_used(name)

    def declare_entity(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def declare_entity_type(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def relate_entities(self, *args: Any, **kwargs: Any) -> None:
        return None

    def finalize(self) -> None:
        _native.finalize()


def _parameters(func: Callable) -> list:
    """[(name, positional index or None)] of `func`'s parameters, in signature order."""
    code = getattr(func, "__code__", None)
    if type(func) is _FunctionType and not hasattr(func, "__wrapped__") and not hasattr(func, "__signature__"):
        # A plain function: its code object says what inspect.signature would (10x faster,
        # so `@df.log` costs little at import time and `df.log(f)` little when inline).
        n_pos, n_kw, flags = code.co_argcount, code.co_kwonlyargcount, code.co_flags
        names = code.co_varnames
        out = [(names[i], i) for i in range(n_pos)]
        n = n_pos + n_kw
        if flags & inspect.CO_VARARGS:
            out.append((names[n], None))
        out += [(names[i], None) for i in range(n_pos, n)]
        if flags & inspect.CO_VARKEYWORDS:
            out.append((names[n + bool(flags & inspect.CO_VARARGS)], None))
        return out
    return _parameters_by_signature(func)


def _parameters_by_signature(func: Callable) -> list:
    """`_parameters` for any callable, through inspect.signature."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [(p.name, i if p.kind in positional else None) for i, p in enumerate(params)]


_FunctionType = type(_parameters)


def _capture_spec(func: Callable, base: dict) -> tuple:
    """(capture list [(name, positional index or None)], first parameter is `self`)."""
    params = _parameters(func)
    capture = [(name, i) for name, i in params if name in CAPTURED]
    names = {name for name, _ in capture}
    self_attrs = bool(params) and params[0][0] == "self"
    for n in CAPTURED:
        if n not in names and (self_attrs or n in base):
            capture.append((n, None))
    return capture, self_attrs


def _decorate(df: "dft_fn", func: Any, name: Optional[str]) -> Any:
    if isinstance(func, staticmethod):
        return staticmethod(_decorate(df, func.__func__, name))
    if isinstance(func, classmethod):
        return classmethod(_decorate(df, func.__func__, name))
    if isinstance(func, property):
        fget = _decorate(df, func.fget, name) if func.fget is not None else None
        return property(fget, func.fset, func.fdel, func.__doc__)
    if not callable(func):
        raise TypeError(f"dft_fn.log(): expected a function, not {type(func).__name__}")
    if not (_native.is_enabled() and df._enabled):
        return func  # zero cost when tracing is off
    event = name or getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    cat = df.cat
    base = {k: v for k, v in df._args.items() if k in CAPTURED}

    if inspect.isgeneratorfunction(func) or inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            sig = None

        def args_of(a: tuple, kw: dict) -> dict:
            out = dict(base)
            if sig is not None:
                try:
                    bound = sig.bind_partial(*a, **kw).arguments
                except TypeError:
                    bound = {}
                out.update({k: v for k, v in bound.items() if k in CAPTURED})
            return out

        if inspect.isgeneratorfunction(func):

            @functools.wraps(func)
            def gen_wrapper(*a: Any, **kw: Any) -> Any:
                t0 = _native.get_time()
                try:
                    return (yield from func(*a, **kw))
                finally:
                    _log(event, cat, t0, args_of(a, kw))

            return gen_wrapper
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def coro_wrapper(*a: Any, **kw: Any) -> Any:
                t0 = _native.get_time()
                try:
                    return await func(*a, **kw)
                finally:
                    _log(event, cat, t0, args_of(a, kw))

            return coro_wrapper

        @functools.wraps(func)
        async def agen_wrapper(*a: Any, **kw: Any) -> Any:
            t0 = _native.get_time()
            try:
                async for item in func(*a, **kw):
                    yield item
            finally:
                _log(event, cat, t0, args_of(a, kw))

        return agen_wrapper

    capture, self_attrs = _capture_spec(func, base)
    wrapper = _Wrapped(func, event, cat, capture, self_attrs, list(base.items()))
    functools.update_wrapper(wrapper, func)
    return wrapper


#: A category of events: a decorator factory and a context manager (native: built inline in
#: loops, `with dft_fn("io", name="read"):` costs about what building and entering any native
#: context manager costs). `dft_fn(cat, name=None, epoch=None, step=None, image_idx=None,
#: image_size=None, enable=True)`; `name` defaults to the calling function's name. Its `log`,
#: `log_init`, `log_static` and `iter` call the two functions below.
dft_fn = _native.dft_fn


def _dft_fn_log(df: dft_fn, func: Any = None, name: Optional[str] = None) -> Any:
    """`dft_fn.log`: one event per call, named `name` or the function's `__qualname__`,
    recording the epoch/step/image_idx/image_size arguments actually passed."""
    if func is None:
        return lambda f: _decorate(df, f, name)
    if isinstance(func, str) and name is None:
        return lambda f: _decorate(df, f, func)
    return _decorate(df, func, name)


def _dft_fn_iter(df: dft_fn, iterable: Iterable, name: str = "loop", iter_name: str = "step") -> Iterator:
    """`dft_fn.iter`: yields the items of `iterable`, recording `<name>.iter` (waiting for each
    item) and `<name>.yield` (the loop body), with `<iter_name>` = 1, 2, ..."""
    if not (_native.is_enabled() and df._enabled):
        yield from iterable
        return
    yield from _timed_iter(iterable, df.cat, df._args, f"{name}.iter", f"{name}.yield", iter_name)


# pydftracer's package star-imports its `ai` module, so `from dftracer.python import ai` is
# the `AI` singleton (`@ai.compute.forward`), not the module; the module's other names
# (`DFTracerAI`, `ComputeEvent`, ...) are here too. At the end: `ai` imports from this module.
from dftracer.python.ai import *  # noqa: E402,F401,F403
from dftracer.python.ai import __all__ as _ai_all  # noqa: E402

__all__ += _ai_all


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
