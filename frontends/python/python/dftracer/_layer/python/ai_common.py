"""`dftracer.python.ai_common`: annotations for AI workloads (pydftracer 2.0.6's `ai_common`;
the singleton `ai` is made in `ai_init`, and `dftracer.python.ai` exports both).

    from dftracer.python import ai      # the singleton, as pydftracer's package exports it

    @ai.compute.forward
    def forward(batch): ...

    for epoch in ai.pipeline.epoch.iter(range(2)):
        for batch in ai.dataloader.fetch.iter(loader):
            ai.update(epoch=epoch)
            forward(batch)
            with ai.comm.all_reduce:
                ...
        with ai.checkpoint.io.write(args={"path": path}):
            save(path)

Each tracer has a category (`compute`, `data`, `dataloader`, `comm`, `device`,
`checkpoint`, `pipeline`, `other`) and a name; it works as a decorator, a context manager,
`start()`/`stop()`, and `iter()` (events `<name>.iter`, waiting for an item, and
`<name>.block`, the loop body, with `count` = 1, 2, ...). `update()` sets args on a tracer and
all its children; `derive(name)` and `init()` make (and keep) a child `<name>.<name>`.

Deliberate differences from pydftracer (FORMAT.md, "The Python layer"):
- `tracer(args=...)` returns a tracer that carries those args and the tracer's own (pydftracer
  put them on the parent and dropped them from the event);
- `count` is recorded on the `iter()` events only (pydftracer left it in the tracer's args, so
  every later event of that tracer had it);
- a decorated function's calls are timed each on its own (recursion and threads do not
  share one start time);
- `used.ai` is marked in the end record when an `ai` tracer first records (pydftracer: when
  one is built, i.e. at `import dftracer.python` with tracing on).
The tracers record through the native module directly: the module globals `dft_fn` and
`dftracer` (which pydftracer's `ai_init` and `dbg.ai` assign) can be assigned and read, and
are not what records.
"""

from __future__ import annotations

import enum
import functools
import sys
from enum import auto
from typing import Any, Callable, Dict, Iterable, Iterator, Optional

from dftracer import dftracer as _native
from dftracer.python.common import *  # noqa: F401,F403
from dftracer.python.common import _log, _timed_iter
from dftracer.python.common import __all__ as _common_all

#: The `dft_fn` and `dftracer` classes (pydftracer's `ai_init` sets these module globals).
from dftracer.python.common import dft_fn, dftracer  # noqa: E402

__all__ = [n for n in _common_all] + [
    "StringEnum",
    "ITER_COUNT_NAME",
    "INIT_NAME",
    "BLOCK_NAME",
    "ITER_NAME",
    "CTX_SEPARATOR",
    "ROOT_NAME",
    "ROOT_CAT",
    "START_METADATA_NAME",
    "STOP_METADATA_NAME",
    "get_iter_block_name",
    "get_iter_handle_name",
    "DFTracerAI",
    "ProfileCategory",
    "ComputeEvent",
    "DataEvent",
    "DataLoaderEvent",
    "CommunicationEvent",
    "DeviceEvent",
    "PipelineEvent",
    "CheckpointEvent",
    "OtherEvent",
    "IOEvent",
    "IO",
    "Compute",
    "Data",
    "DataLoader",
    "Communication",
    "Device",
    "Checkpoint",
    "Pipeline",
    "Other",
    "AI",
]

ITER_COUNT_NAME = "count"
INIT_NAME = "init"
BLOCK_NAME = "block"
ITER_NAME = "iter"
CTX_SEPARATOR = "."
ROOT_NAME = "ai_root"
ROOT_CAT = "ai_root"
START_METADATA_NAME = "start"
STOP_METADATA_NAME = "end"


def get_iter_block_name(name: str) -> str:
    """`<name>.block` (`name` itself when it already ends so)."""
    suffix = f"{CTX_SEPARATOR}{BLOCK_NAME}"
    return name if name.endswith(suffix) else f"{name}{suffix}"


def get_iter_handle_name(name: str) -> str:
    """`<name>.iter` (`name` itself when it already ends so)."""
    suffix = f"{CTX_SEPARATOR}{ITER_NAME}"
    return name if name.endswith(suffix) else f"{name}{suffix}"


_used = [False]  # [marked `ai` as used in this process's trace]


if sys.version_info >= (3, 11):
    StringEnum = enum.StrEnum  # values: the lower-case member names
else:

    class StringEnum(str, enum.Enum):  # type: ignore[no-redef]
        """String enum whose values are the lower-case member names (`enum.StrEnum` from
        3.11, as pydftracer's)."""

        @staticmethod
        def _generate_next_value_(name: str, start: int, count: int, last_values: list) -> str:
            return name.lower()

        def __str__(self) -> str:
            return str(self.value)


class ProfileCategory(StringEnum):
    COMPUTE = auto()
    DATA = auto()
    DATALOADER = auto()
    COMM = auto()
    DEVICE = auto()
    CHECKPOINT = auto()
    PIPELINE = auto()
    OTHER = auto()


class ComputeEvent(StringEnum):
    FORWARD = auto()
    BACKWARD = auto()
    STEP = auto()


class DataEvent(StringEnum):
    PREPROCESS = auto()
    ITEM = auto()


class DataLoaderEvent(StringEnum):
    FETCH = auto()


class CommunicationEvent(StringEnum):
    SEND = auto()
    RECEIVE = auto()
    BARRIER = auto()
    BCAST = auto()
    REDUCE = auto()
    ALL_REDUCE = auto()
    GATHER = auto()
    ALL_GATHER = auto()
    SCATTER = auto()
    REDUCE_SCATTER = auto()
    ALL_TO_ALL = auto()


class DeviceEvent(StringEnum):
    TRANSFER = auto()


class PipelineEvent(StringEnum):
    EPOCH = auto()
    TRAIN = auto()
    EVALUATE = auto()
    TEST = auto()


class CheckpointEvent(StringEnum):
    CAPTURE = auto()
    RESTART = auto()


class OtherEvent(StringEnum):
    LOG = auto()


class IOEvent(StringEnum):
    OPEN = auto()
    READ = auto()
    WRITE = auto()
    CLOSE = auto()


def _values(epoch: Any, step: Any, image_idx: Any, image_size: Any, args: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The args given to a tracer call, TagValues unwrapped, Nones dropped."""
    if args is not None and not isinstance(args, dict):
        raise TypeError(f"args must be a dict, not {type(args).__name__}")
    out = {}
    for k, v in (("epoch", epoch), ("step", step), ("image_idx", image_idx), ("image_size", image_size), *(args or {}).items()):
        if v is None:
            continue
        if isinstance(v, TagValue):
            v = v.value()[1]
        out[str(k)] = v
    return out


class _DFTracerAI:
    """A named tracer of one category (pydftracer's base class; see the module docstring)."""

    def __init__(
        self,
        cat: str,
        name: Optional[str] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        self._cat = str(cat)
        self._name = str(name) if name else self._cat
        self._enabled = bool(enable)
        self._args: Dict[str, Any] = _values(epoch, step, image_idx, image_size, None)
        self._t0: Optional[int] = None

    # -- identity
    @property
    def cat(self) -> str:
        return self._cat

    @property
    def name(self) -> str:
        return self._name

    def _on(self) -> bool:
        if not (self._enabled and _native.is_enabled()):
            return False
        if not _used[0]:
            # `used.ai` in the end record: marked when an `ai` tracer first records, not when
            # one is built (the `ai` singleton is built by `import dftracer.python`, and
            # marking starts a tracer from the environment).
            _used[0] = True
            _native.mark_used("ai")
        return True

    def get_time(self) -> int:
        return _native.get_time()

    # -- args
    def update(
        self,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        args: Optional[Dict[str, Any]] = None,
    ) -> "_DFTracerAI":
        """Sets args recorded by this tracer's events."""
        self._args.update(_values(epoch, step, image_idx, image_size, args))
        return self

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    # -- decorator / derived tracer
    def __call__(
        self,
        fn: Optional[Callable] = None,
        *,
        enable: Optional[bool] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        args: Optional[Dict[str, Any]] = None,
    ) -> Any:
        """`@tracer` wraps a function; `tracer(epoch=..., args=...)` is a tracer with those
        args (a context manager or, applied to a function, a decorator)."""
        given = _values(epoch, step, image_idx, image_size, args)
        on = self._enabled if enable is None else bool(enable)
        if fn is None:
            t = DFTracerAI(cat=self._cat, name=self._name, enable=on)
            t._args = {**self._args, **given}
            return t
        if not callable(fn):
            raise TypeError(f"{self._name}: expected a function to decorate, not {type(fn).__name__}")
        tracer = self
        if given or enable is not None:
            tracer = DFTracerAI(cat=self._cat, name=self._name, enable=on)
            tracer._args = {**self._args, **given}
        if not tracer._on():
            return fn

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            if not tracer._on():
                return fn(*a, **kw)
            t0 = _native.get_time()
            try:
                return fn(*a, **kw)
            finally:
                _log(tracer._name, tracer._cat, t0, tracer._args)

        return wrapper

    # -- regions
    def __enter__(self) -> "_DFTracerAI":
        self._t0 = _native.get_time() if self._on() else None
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        if self._t0 is not None and self._on():
            _log(self._name, self._cat, self._t0, self._args)
        self._t0 = None

    def start(self, metadata: bool = False) -> None:
        """Starts the region (`stop()` records it); `metadata=True`: writes a CM record
        `<name>.start` with the time instead."""
        if metadata:
            if self._on():
                _native.log_metadata_event(f"{self._name}{CTX_SEPARATOR}{START_METADATA_NAME}", str(_native.get_time()))
        else:
            self.__enter__()

    def stop(self, metadata: bool = False) -> None:
        if metadata:
            if self._on():
                _native.log_metadata_event(f"{self._name}{CTX_SEPARATOR}{STOP_METADATA_NAME}", str(_native.get_time()))
        else:
            self.__exit__(None, None, None)

    def reset(self) -> None:
        """Restarts an open region now."""
        if self._t0 is not None:
            self._t0 = _native.get_time()

    def iter(
        self,
        iterator: Iterable,
        *,
        include_block: bool = True,
        include_iter: bool = True,
        iter_name: Optional[str] = None,
        block_name: Optional[str] = None,
    ) -> Iterator:
        """Yields the items, recording `<name>.iter` (getting each item) and `<name>.block`
        (the loop body) with `count` = 1, 2, ..."""
        if not self._on():
            yield from iterator
            return
        yield from _timed_iter(
            iterator,
            self._cat,
            self._args,
            (iter_name or get_iter_handle_name(self._name)) if include_iter else None,
            (block_name or get_iter_block_name(self._name)) if include_block else None,
            ITER_COUNT_NAME,
            wait_after_body=True,
        )


class DFTracerAI(_DFTracerAI):
    """A tracer with children (`create_children`, `derive`, `init`); `update`, `enable`
    and `disable` reach them all."""

    def __init__(
        self,
        *,
        cat: str,
        name: Optional[str] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        super().__init__(cat, name, epoch, step, image_idx, image_size, enable)
        self._children: Dict[str, DFTracerAI] = {}

    def _child(self, name: str) -> "DFTracerAI":
        child = DFTracerAI(cat=self._cat, name=name, enable=self._enabled)
        child._args = dict(self._args)
        return child

    def create_children(self, names: Dict[str, str]) -> None:
        """For each `attr: name`, a child tracer `self.<attr>` named `name`."""
        for attr, event_name in names.items():
            child = self._child(str(event_name))
            setattr(self, attr, child)
            self._children[attr] = child

    def update(
        self,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        args: Optional[Dict[str, Any]] = None,
    ) -> "DFTracerAI":
        """Sets args recorded by this tracer's events and all its children's."""
        super().update(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, args=args)
        for child in self._children.values():
            child.update(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, args=args)
        return self

    def enable(self) -> None:
        super().enable()
        for child in self._children.values():
            child.enable()

    def disable(self) -> None:
        super().disable()
        for child in self._children.values():
            child.disable()

    def derive(self, name: str) -> "DFTracerAI":
        """The child tracer `<this name>.<name>` in the same category (made once)."""
        full = f"{self._name}{CTX_SEPARATOR}{name}"
        child = self._children.get(full)
        if child is None:
            child = self._children[full] = self._child(full)
        return child

    def init(
        self,
        fn: Optional[Callable] = None,
        *,
        enable: Optional[bool] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        args: Optional[Dict[str, Any]] = None,
    ) -> Any:
        """The initialisation step `<name>.init`: a decorator given `fn`, else a tracer."""
        return self.derive(INIT_NAME)(fn, enable=enable, epoch=epoch, step=step, image_idx=image_idx,
                                      image_size=image_size, args=args)


class IO(DFTracerAI):
    """`<parent>.io` with children `open`, `read`, `write`, `close` (`<parent>.io.<op>`)."""

    open: DFTracerAI
    read: DFTracerAI
    write: DFTracerAI
    close: DFTracerAI

    def __init__(
        self,
        *,
        cat: str,
        parent_name: str,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        io_name = f"{parent_name}{CTX_SEPARATOR}io"
        super().__init__(cat=cat, name=io_name, epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, enable=enable)
        self.create_children({str(e): f"{io_name}{CTX_SEPARATOR}{e}" for e in IOEvent})


class _Category(DFTracerAI):
    """A category's root tracer: `_CAT` names it and its events, `_EVENTS` (attr: name) are
    its children, `_IO` adds `<cat>.io`."""

    _CAT: ProfileCategory
    _EVENTS: Dict[str, str] = {}
    _IO = False

    def __init__(
        self,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        cat = self._CAT
        super().__init__(cat=cat, name=cat, epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, enable=enable)
        self.create_children(self._EVENTS)
        if self._IO:
            self.io = IO(cat=cat, parent_name=str(cat), epoch=epoch, step=step, image_idx=image_idx,
                         image_size=image_size, enable=enable)
            self._children["io"] = self.io


def _events(kind: Any) -> Dict[str, str]:
    return {str(e): str(e) for e in kind}


class Compute(_Category):
    """Category `compute`: `forward`, `backward`, `step`."""

    _CAT = ProfileCategory.COMPUTE
    _EVENTS = _events(ComputeEvent)


class Data(_Category):
    """Category `data`: `preprocess`, `item`, `io`."""

    _CAT = ProfileCategory.DATA
    _EVENTS = _events(DataEvent)
    _IO = True


class DataLoader(_Category):
    """Category `dataloader`: `fetch`."""

    _CAT = ProfileCategory.DATALOADER
    _EVENTS = _events(DataLoaderEvent)


class Communication(_Category):
    """Category `comm`: `send`, `receive`, `barrier`, `bcast`, `reduce`, `all_reduce`,
    `gather`, `all_gather`, `scatter`, `reduce_scatter`, `all_to_all`."""

    _CAT = ProfileCategory.COMM
    _EVENTS = _events(CommunicationEvent)


class Device(_Category):
    """Category `device`: `transfer`."""

    _CAT = ProfileCategory.DEVICE
    _EVENTS = _events(DeviceEvent)


class Checkpoint(_Category):
    """Category `checkpoint`: `capture`, `restart`, `io`."""

    _CAT = ProfileCategory.CHECKPOINT
    _EVENTS = _events(CheckpointEvent)
    _IO = True


class Pipeline(_Category):
    """Category `pipeline`: `epoch`, `train`, `evaluate`, `test`."""

    _CAT = ProfileCategory.PIPELINE
    _EVENTS = _events(PipelineEvent)


class Other(_Category):
    """Category `other`, for work outside the others: `log` (named `other.log`), `io`."""

    _CAT = ProfileCategory.OTHER
    _EVENTS = {"log": f"{ProfileCategory.OTHER}{CTX_SEPARATOR}{OtherEvent.LOG}"}
    _IO = True


class AI(DFTracerAI):
    """The root: `compute`, `data`, `dataloader`, `comm`, `device`, `checkpoint`, `pipeline`,
    `other`; `update()` here reaches every tracer."""

    compute: Compute
    data: Data
    dataloader: DataLoader
    comm: Communication
    device: Device
    checkpoint: Checkpoint
    pipeline: Pipeline
    other: Other

    def __init__(
        self,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        super().__init__(cat=ROOT_CAT, name=ROOT_NAME, epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, enable=enable)
        for attr, cls in (
            ("compute", Compute),
            ("data", Data),
            ("dataloader", DataLoader),
            ("comm", Communication),
            ("device", Device),
            ("checkpoint", Checkpoint),
            ("pipeline", Pipeline),
            ("other", Other),
        ):
            child = cls(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, enable=enable)
            setattr(self, attr, child)
            self._children[attr] = child
