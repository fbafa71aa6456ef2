"""`dftracer.python.common`: the tracer (`dftracer`), the event category (`dft_fn`) and
their types (pydftracer 2.0.6's `common` module; `dftracer.python.logger` re-exports it).

    from dftracer.python.common import dftracer, dft_fn, TagValue, TagDType, capture_signal

`dft_fn` is the native class (`dftracer.dftracer.dft_fn`): building, entering and leaving it
run no Python frame; its `log`, `log_init`, `log_static` and `iter` call `_dft_fn_log` and
`_dft_fn_iter` below once per decorated function or loop. `dftracer.log_event` is native too.

Deliberate differences from pydftracer (FORMAT.md, "The Python layer"): decorators record the
arguments actually passed and what `update()` set during the call (not on later calls); no signal handlers are installed at import (`capture_signal` is
here for code that installs it); `initialize_log` writes no `dft.log`; events logged before
`initialize_log` are kept; with tracing off decorators return the function itself.
"""

from __future__ import annotations

import builtins
import enum
import functools
import inspect
import logging
import os
import sys
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, TypeVar, Union

try:  # Protocol: typing from 3.8
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore[assignment,misc]

from dftracer import dftracer as _native
from dftracer.dftracer import _Tracer, _Wrapped
from dftracer.python.env import *  # noqa: F401,F403
from dftracer.python.env import DFTRACER_LOG_LEVEL, DFTRACER_TIME_METRIC_ENV, _log_level
from dftracer.python.env import __all__ as _env_all

__all__ = list(_env_all) + [
    "P",
    "R",
    "T",
    "TagValueTuple",
    "EntityStore",
    "EntityRole",
    "EntityRelation",
    "EntityID",
    "ProfilerProtocol",
    "NoOpProfiler",
    "profiler",
    "TagType",
    "TagDType",
    "TagValue",
    "get_time_scale",
    "capture_signal",
    "setup_logger",
    "dftracer",
    "get_default_args",
    "dft_fn",
]

try:  # typing from 3.10
    from typing import ParamSpec
except ImportError:  # pragma: no cover
    try:
        from typing_extensions import ParamSpec
    except ImportError:
        ParamSpec = None  # type: ignore[assignment,misc]

#: The decorated function's parameters (a TypeVar where ParamSpec is missing).
P = ParamSpec("P") if ParamSpec is not None else TypeVar("P")  # type: ignore[misc]
R = TypeVar("R")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: What `TagValue.value()` returns: (tag type, value).
TagValueTuple = Tuple[int, Union[int, float, str]]

#: Parameters a decorated function's call records (as the reference does).
CAPTURED = ("epoch", "step", "image_idx", "image_size")


class EntityStore(enum.IntEnum):
    """Where an entity lives (pydftracer's values)."""

    MEMORY = 0
    GPU_MEMORY = 1
    LOCAL_DISK = 2
    PARALLEL_FS = 3
    BURST_BUFFER = 4
    OBJECT_STORE = 5
    DATABASE = 6
    NETWORK = 7
    OTHER = 8


class EntityRole(enum.IntEnum):
    """An entity type's role in the workflow (pydftracer's values)."""

    UNKNOWN = 0
    INPUT = 1
    OUTPUT = 2
    INTERMEDIATE = 3
    PARAMETER = 4
    REFERENCE = 5


class EntityRelation(enum.IntEnum):
    """Event->entity relations (< 16) and entity->entity relations (>= 16)."""

    USED = 0
    GENERATED = 1
    INVALIDATED = 2
    UPDATED = 3
    DERIVED_FROM = 16
    REVISION_OF = 17
    CONTAINS = 18
    PART_OF = 19
    SPECIALIZATION_OF = 20
    ALTERNATE_OF = 21
    DEPENDS_ON = 22


#: An entity's 64-bit id; 0 is "no entity" (what every entity call returns here: the native
#: module records no entities, as the reference's 2.2.0 native module).
EntityID = int


class ProfilerProtocol(Protocol):
    """What the tracer calls on its native module (`dftracer.dftracer` is one)."""

    def initialize(self, log_file: Optional[str] = None, data_dirs: Optional[str] = None, process_id: int = -1) -> None: ...
    def get_time(self) -> int: ...
    def get_config(self, key: str) -> str: ...
    def enter_event(self) -> None: ...
    def exit_event(self) -> None: ...
    def log_event(self, name: str, cat: str, start_time: int, duration: int, int_args: Optional[Dict[str, TagValueTuple]] = None,
                  string_args: Optional[Dict[str, TagValueTuple]] = None, float_args: Optional[Dict[str, TagValueTuple]] = None,
                  relations: Optional[Dict[Any, List[int]]] = None) -> None: ...
    def log_metadata_event(self, key: str, value: str) -> None: ...
    def declare_entity(self, type: str, key: str, store: Any, uri: str) -> EntityID: ...
    def declare_entity_type(self, type: str, role: Any, description: str) -> None: ...
    def relate_entities(self, relation: Any, subject: EntityID, object: EntityID) -> None: ...
    def set_app_metadata_int(self, key: str, value: int) -> None: ...
    def set_app_metadata_string(self, key: str, value: str) -> None: ...
    def mark_used(self, name: str) -> None: ...
    def finalize(self) -> None: ...


class NoOpProfiler:
    """A `ProfilerProtocol` that does nothing (`profiler` when tracing is off)."""

    def initialize(self, log_file: Optional[str] = None, data_dirs: Optional[str] = None, process_id: int = -1) -> None:
        pass

    def get_time(self) -> int:
        return 0

    def get_config(self, key: str) -> str:
        return ""

    def enter_event(self) -> None:
        pass

    def exit_event(self) -> None:
        pass

    def log_event(self, name: str, cat: str, start_time: int, duration: int, int_args: Optional[Dict[str, TagValueTuple]] = None,
                  string_args: Optional[Dict[str, TagValueTuple]] = None, float_args: Optional[Dict[str, TagValueTuple]] = None,
                  relations: Optional[Dict[Any, List[int]]] = None) -> None:
        pass

    def log_metadata_event(self, key: str, value: str) -> None:
        pass

    def declare_entity(self, type: str, key: str, store: Any, uri: str) -> EntityID:
        return 0

    def declare_entity_type(self, type: str, role: Any, description: str) -> None:
        pass

    def relate_entities(self, relation: Any, subject: EntityID, object: EntityID) -> None:
        pass

    def set_app_metadata_int(self, key: str, value: int) -> None:
        pass

    def set_app_metadata_string(self, key: str, value: str) -> None:
        pass

    def mark_used(self, name: str) -> None:
        pass

    def finalize(self) -> None:
        pass


#: The native module the tracer records through: `dftracer.dftracer` when tracing is on, a
#: `NoOpProfiler` otherwise (as pydftracer's `logger` sets it). Our tracer calls the native
#: module directly; assigning this changes what `dftracer.get_instance().logger` is after
#: the next `initialize_log`.
profiler: Any = _native if _native.is_enabled() else NoOpProfiler()


class TagType(enum.Enum):
    KEY = 0
    VALUE = 1
    IGNORE = 2

    def __int__(self) -> int:
        return self.value


class TagDType(enum.Enum):
    INT = 0
    FLOAT = 1
    STRING = 2

    def __int__(self) -> int:
        return self.value


class TagValue:
    """A tagged arg value, converted to its dtype: `TagValue("5", TagDType.INT).value() ==
    (0, 5)`."""

    __slots__ = ("_value", "_dtype", "_tag_type")

    def __init__(self, value: Any, dtype: TagDType = TagDType.STRING, tag_type: TagType = TagType.KEY) -> None:
        if not isinstance(dtype, TagDType):
            raise TypeError(f"TagValue(): dtype must be a TagDType, not {type(dtype).__name__}")
        if not isinstance(tag_type, TagType):
            raise TypeError(f"TagValue(): tag_type must be a TagType, not {type(tag_type).__name__}")
        self._dtype = dtype
        self._tag_type = tag_type
        if dtype is TagDType.INT:
            self._value: Union[int, float, str] = int(value)
        elif dtype is TagDType.FLOAT:
            self._value = float(value)
        else:
            self._value = str(value)

    def value(self) -> TagValueTuple:
        return (int(self._tag_type), self._value)

    def __repr__(self) -> str:
        return f"TagValue({self._value!r}, {self._dtype}, {self._tag_type})"


#: Units per second of each DFTRACER_TIME_METRIC value.
_TIME_METRIC_UNITS_PER_SECOND = {"NS": 1e9, "US": 1e6, "MS": 1e3, "SEC": 1.0}


def get_time_scale() -> float:
    """Time units per second of the configured `DFTRACER_TIME_METRIC` (1e6 for the default
    US): a tool with its own epoch-nanosecond clock places a timestamp on ours as
    `epoch_ns * get_time_scale() / 1e9`. (pydftracer answers 1e6 until `initialize_log`.)"""
    metric = (_native.get_config(DFTRACER_TIME_METRIC_ENV) or "US").strip().upper()
    return _TIME_METRIC_UNITS_PER_SECOND.get(metric, _TIME_METRIC_UNITS_PER_SECOND["US"])


def capture_signal(signal_number: int, frame: Any) -> None:
    """pydftracer's signal handler, for code that installs it itself
    (`signal.signal(signal.SIGTERM, capture_signal)`; we install none): finishes the trace,
    then exits with the signal number."""
    dftracer.get_instance().finalize()
    sys.exit(signal_number)


def setup_logger(name: str, log_file: str, formatter: str, level: int = logging.INFO) -> logging.Logger:
    """The logger `name` at `level`, writing to `log_file` with `formatter` (pydftracer's
    helper; our `initialize_log` does not call it, so no `dft.log` is made)."""
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter(formatter))
    log = logging.getLogger(name)
    log.setLevel(level)
    log.addHandler(handler)
    return log


def get_default_args(func: Callable) -> Dict[str, Any]:
    """{parameter: default} of `func`'s parameters that have one."""
    return {
        k: p.default
        for k, p in inspect.signature(func).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


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
                body_name: Optional[str], count_key: str, wait_after_body: bool = False) -> Iterator:
    """Yields the items of `iterable`, recording `wait_name` (getting each item) and
    `body_name` (the caller's loop body) with `count_key` = 1, 2, ...; `args` is read at each
    event, so updates made inside the loop are recorded. A `None` name records nothing.
    `wait_after_body`: the wait event is recorded after the body too, with the args the body
    set (as pydftracer's `ai` tracers do; its `dft_fn.iter` records it before the body)."""
    it = builtins.iter(iterable)
    count = 1
    while True:
        t0 = _native.get_time()
        try:
            item = next(it)
        except StopIteration:
            return
        t1 = _native.get_time()
        if wait_name and not wait_after_body:
            _log_span(wait_name, cat, t0, t1, {**args, count_key: count})
        yield item
        if wait_name and wait_after_body:
            _log_span(wait_name, cat, t0, t1, {**args, count_key: count})
        if body_name:
            _log(body_name, cat, t1, {**args, count_key: count})
        count += 1


def _log_span(name: str, cat: str, t0: int, t1: int, args: dict) -> None:
    ints, strings, floats = _split(args)
    _native.log_event(name, cat, t0, max(t1 - t0, 0), ints, strings, floats)


class dftracer(_Tracer):
    """The process's tracer (pydftracer's singleton class). `log_event(name, cat, start_time,
    duration, int_args=None, float_args=None, string_args=None, relations=None)` is native
    (`_Tracer`): no Python frame per event. Unlike pydftracer's, the methods work before
    `initialize_log` (the native module starts from the environment)."""

    __instance: Optional["dftracer"] = None

    def __init__(self) -> None:
        self.logger: Any = None
        #: pydftracer's `dft.log` logger; here `dftracer_dbg` with no handler of ours.
        self.dbg_logging: Optional[logging.Logger] = None
        self.start_time: int = 0
        self._used: set = set()
        dftracer.__instance = self

    @classmethod
    def get_instance(cls) -> "dftracer":
        if dftracer.__instance is None:
            dftracer()
        assert dftracer.__instance is not None
        return dftracer.__instance

    @staticmethod
    def initialize_log(logfile: Optional[str] = None, data_dir: Optional[str] = None, process_id: int = -1) -> "dftracer":
        """Starts tracing to `<logfile minus extension>-<hash>-app.pfw.gz` (or
        `DFTRACER_LOG_FILE`, else `./trace`), creating the parent directory."""
        inst = dftracer.get_instance()
        if logfile is not None:
            if not isinstance(logfile, (str, os.PathLike)):
                raise TypeError(f"initialize_log(): logfile must be a str or path, not {type(logfile).__name__}")
            logfile = os.fspath(logfile)
            if not isinstance(logfile, str):
                raise TypeError("initialize_log(): logfile must be a str or path")
            parent = os.path.dirname(os.path.abspath(logfile))
            if _native.is_enabled() and parent:
                os.makedirs(parent, exist_ok=True)
        if data_dir is not None and not isinstance(data_dir, str):
            data_dir = os.fspath(data_dir)
        pid = process_id if isinstance(process_id, int) else -1
        log = logging.getLogger("dftracer_dbg")
        log.setLevel(_log_level())
        inst.dbg_logging = log
        _native.initialize(logfile, data_dir, pid)
        inst.logger = profiler if _native.is_enabled() else None
        inst.start_time = _native.get_time()
        inst.mark_used("python_function")
        return inst

    def get_time(self) -> int:
        return _native.get_time()

    def get_config(self, key: str) -> str:
        return _native.get_config(key)

    def enter_event(self) -> None:
        _native.enter_event()

    def exit_event(self) -> None:
        _native.exit_event()

    def log_metadata_event(self, key: str, value: str) -> None:
        _native.log_metadata_event(key, value)

    # Entities: the native module records none (as the reference's 2.2.0 module has no
    # entity API, with which pydftracer's calls return 0 and do nothing).
    def declare_entity(self, type: str, key: Any, store: EntityStore = EntityStore.MEMORY, uri: str = "") -> EntityID:
        return 0

    def declare_entity_type(self, type: str, role: EntityRole = EntityRole.UNKNOWN, description: str = "") -> None:
        return None

    def relate_entities(self, relation: EntityRelation, subject: EntityID, object: EntityID) -> None:
        return None

    def set_app_metadata_int(self, key: str, value: int) -> None:
        _native.set_app_metadata_int(key, value)

    def set_app_metadata_string(self, key: str, value: str) -> None:
        _native.set_app_metadata_string(key, value)

    def mark_used(self, name: str) -> None:
        if name not in self._used:
            self._used.add(name)
            _native.mark_used(name)

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


def _segments(it: Any, df: "dft_fn", got: dict) -> Any:
    """`yield from it` (send, throw and close passed on as PEP 380 says), putting in `got`
    what `df.update()` set on this thread while `it`'s own code ran (each resumption of it):
    a decorated generator or coroutine records the updates made during it, as `_Wrapped`
    does for a call, and not those its consumer made between two of its steps."""
    mark, since = df._update_mark, df._updates_since

    def step(f: Any, *args: Any) -> Any:
        """`f(*args)`, one resumption of `it`; the updates it made go into `got`."""
        m = mark()
        try:
            return f(*args)
        finally:
            d = since(m)
            if d:
                got.update(d)

    try:
        y = step(next, it)
    except StopIteration as e:
        return e.value
    while True:
        try:
            s = yield y
        except GeneratorExit:
            close = getattr(it, "close", None)
            if close is not None:
                step(close)
            raise
        except BaseException as exc:
            throw = getattr(it, "throw", None)
            if throw is None:
                raise
            try:
                y = step(throw, exc)
            except StopIteration as e:
                return e.value
        else:
            try:
                y = step(next, it) if s is None else step(it.send, s)
            except StopIteration as e:
                return e.value


class _Steps:
    """An awaitable whose steps are `_segments(it, df, got)`'s (`it`: a coroutine's
    `__await__()` iterator)."""

    __slots__ = ("_steps",)

    def __init__(self, it: Any, df: "dft_fn", got: dict) -> None:
        self._steps = _segments(it, df, got)

    def __await__(self) -> Any:
        return self._steps


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
    # The constructor's values only: what update() set reaches the calls in progress alone.
    base = df._base_args

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
                got: dict = {}
                try:
                    return (yield from _segments(func(*a, **kw), df, got))
                finally:
                    _log(event, cat, t0, {**args_of(a, kw), **got})

            return gen_wrapper
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def coro_wrapper(*a: Any, **kw: Any) -> Any:
                t0 = _native.get_time()
                got: dict = {}
                try:
                    return await _Steps(func(*a, **kw).__await__(), df, got)
                finally:
                    _log(event, cat, t0, {**args_of(a, kw), **got})

            return coro_wrapper

        @functools.wraps(func)
        async def agen_wrapper(*a: Any, **kw: Any) -> Any:
            t0 = _native.get_time()
            got: dict = {}
            agen = func(*a, **kw)
            try:
                while True:
                    try:
                        item = await _Steps(agen.__anext__().__await__(), df, got)
                    except StopAsyncIteration:
                        break
                    yield item
            finally:
                _log(event, cat, t0, {**args_of(a, kw), **got})

        return agen_wrapper

    capture, self_attrs = _capture_spec(func, base)
    wrapper = _Wrapped(func, event, cat, capture, self_attrs, list(base.items()), df)
    functools.update_wrapper(wrapper, func)
    return wrapper


#: A category of events: a decorator factory and a context manager (native: built inline in
#: loops, `with dft_fn("io", name="read"):` costs about what building and entering any native
#: context manager costs). `dft_fn(cat, name=None, epoch=None, step=None, image_idx=None,
#: image_size=None, enable=True)`; `name` defaults to the calling function's name. Its `log`,
#: `log_init`, `log_static` and `iter` call the two functions below.
dft_fn = _native.dft_fn


def _dft_fn_log(df: Any, func: Any = None, name: Optional[str] = None) -> Any:
    """`dft_fn.log`: one event per call, named `name` or the function's `__qualname__`,
    recording the epoch/step/image_idx/image_size arguments actually passed (else the
    `dft_fn`'s own) and what `update()` of that `dft_fn` set on this thread during the call
    (over the arguments: it ran later); never what it set before the call."""
    if func is None:
        return lambda f: _decorate(df, f, name)
    if isinstance(func, str) and name is None:
        return lambda f: _decorate(df, f, func)
    return _decorate(df, func, name)


def _dft_fn_iter(df: Any, iterable: Iterable, name: str = "loop", iter_name: str = "step") -> Iterator:
    """`dft_fn.iter`: yields the items of `iterable`, recording `<name>.iter` (waiting for each
    item) and `<name>.yield` (the loop body), with `<iter_name>` = 1, 2, ..."""
    if not (_native.is_enabled() and df._enabled):
        yield from iterable
        return
    yield from _timed_iter(iterable, df.cat, df._args, f"{name}.iter", f"{name}.yield", iter_name)


# pydftracer's signatures on the native class's Python-level methods (decorating, entities:
# never per call or per event), and its constructor's for inspect.signature.
def _log_init(self: dft_fn, init: Any = None, name: Optional[str] = None) -> Any:
    """Decorator for `__init__`: one event per call, as `log`."""
    return _dft_fn_log(self, init, name)


def _log_static(self: dft_fn, func: Any = None, name: Optional[str] = None) -> Any:
    """Decorator for static methods (also given the staticmethod object): as `log`."""
    return _dft_fn_log(self, func, name)


def _relate(self: dft_fn, relation: EntityRelation, entity: EntityID) -> dft_fn:
    """Relates this event to an entity: not recorded (no entity API in the native module)."""
    return self


def _relate_entity(self: dft_fn, relation: EntityRelation, type: str, key: Any,
                   store: EntityStore = EntityStore.MEMORY, uri: str = "") -> EntityID:
    """Declares (type, key) and relates it: 0, nothing recorded."""
    return 0


def _uses(self: dft_fn, type: str, key: Any, store: EntityStore = EntityStore.MEMORY, uri: str = "") -> EntityID:
    """This event consumed entity (type, key): 0, nothing recorded."""
    return 0


def _generates(self: dft_fn, type: str, key: Any, store: EntityStore = EntityStore.MEMORY, uri: str = "") -> EntityID:
    """This event produced entity (type, key): 0, nothing recorded."""
    return 0


for _name, _fn in (("log_init", _log_init), ("log_static", _log_static), ("relate", _relate),
                   ("relate_entity", _relate_entity), ("uses", _uses), ("generates", _generates)):
    _fn.__name__ = _fn.__qualname__ = _name
    setattr(dft_fn, _name, _fn)
del _name, _fn

_P = inspect.Parameter
dft_fn.__signature__ = inspect.Signature(
    [_P("cat", _P.POSITIONAL_OR_KEYWORD)]
    + [_P(n, _P.POSITIONAL_OR_KEYWORD, default=None) for n in ("name", "epoch", "step", "image_idx", "image_size")]
    + [_P("enable", _P.POSITIONAL_OR_KEYWORD, default=True)]
)
del _P
