"""`dftracer.python.ai`: annotations for AI workloads (pydftracer's `ai` API).

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
all its children. Unlike pydftracer, `tracer(args=...)` returns a tracer that carries those
args (the reference put them on the parent and dropped them from the event).
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, Dict, Iterable, Iterator, Optional

from dftracer import dftracer as _native
from dftracer.python import _log, _timed_iter

__all__ = [
    "ai",
    "AI",
    "DFTracerAI",
    "IO",
    "Compute",
    "Data",
    "DataLoader",
    "Communication",
    "Device",
    "Checkpoint",
    "Pipeline",
    "Other",
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
    "INIT_NAME",
    "ITER_COUNT_NAME",
    "BLOCK_NAME",
    "ITER_NAME",
    "CTX_SEPARATOR",
    "ROOT_NAME",
    "ROOT_CAT",
    "START_METADATA_NAME",
    "STOP_METADATA_NAME",
    "get_iter_block_name",
    "get_iter_handle_name",
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
    return f"{name}{CTX_SEPARATOR}{BLOCK_NAME}"


def get_iter_handle_name(name: str) -> str:
    return f"{name}{CTX_SEPARATOR}{ITER_NAME}"


_used = [False]  # [marked `ai` as used in this process's trace]


class _Names(str, enum.Enum):
    """String enum whose values are the lower-case member names."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list) -> str:
        return name.lower()

    def __str__(self) -> str:
        return str(self.value)


class ProfileCategory(_Names):
    COMPUTE = enum.auto()
    DATA = enum.auto()
    DATALOADER = enum.auto()
    COMM = enum.auto()
    DEVICE = enum.auto()
    CHECKPOINT = enum.auto()
    PIPELINE = enum.auto()
    OTHER = enum.auto()


class ComputeEvent(_Names):
    FORWARD = enum.auto()
    BACKWARD = enum.auto()
    STEP = enum.auto()


class DataEvent(_Names):
    PREPROCESS = enum.auto()
    ITEM = enum.auto()


class DataLoaderEvent(_Names):
    FETCH = enum.auto()


class CommunicationEvent(_Names):
    SEND = enum.auto()
    RECEIVE = enum.auto()
    BARRIER = enum.auto()
    BCAST = enum.auto()
    REDUCE = enum.auto()
    ALL_REDUCE = enum.auto()
    GATHER = enum.auto()
    ALL_GATHER = enum.auto()
    SCATTER = enum.auto()
    REDUCE_SCATTER = enum.auto()
    ALL_TO_ALL = enum.auto()


class DeviceEvent(_Names):
    TRANSFER = enum.auto()


class PipelineEvent(_Names):
    EPOCH = enum.auto()
    TRAIN = enum.auto()
    EVALUATE = enum.auto()
    TEST = enum.auto()


class CheckpointEvent(_Names):
    CAPTURE = enum.auto()
    RESTART = enum.auto()


class OtherEvent(_Names):
    LOG = enum.auto()


class IOEvent(_Names):
    OPEN = enum.auto()
    READ = enum.auto()
    WRITE = enum.auto()
    CLOSE = enum.auto()


class DFTracerAI:
    """A named tracer of one category; see the module docstring for its uses."""

    def __init__(
        self,
        cat: Any,
        name: Optional[Any] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        self._cat = str(cat)
        self._name = str(name) if name else self._cat
        self._enabled = enable
        self._args: Dict[str, Any] = {}
        self._children: Dict[str, "DFTracerAI"] = {}
        self._t0: Optional[int] = None
        self.update(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size)

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

    # -- children
    def create_children(self, names: Dict[str, Any]) -> None:
        for attr, event_name in names.items():
            child = DFTracerAI(self._cat, str(event_name), enable=self._enabled)
            child._args = dict(self._args)
            self._children[attr] = child
            setattr(self, attr, child)

    def derive(self, name: str) -> "DFTracerAI":
        """A child tracer `<this name>.<name>` in the same category."""
        child = DFTracerAI(self._cat, f"{self._name}{CTX_SEPARATOR}{name}", enable=self._enabled)
        child._args = dict(self._args)
        self._children[name] = child
        return child

    def init(self, fn: Optional[Callable] = None, **kwargs: Any) -> Any:
        """Tracer (or decorator) for the initialisation step `<name>.init`."""
        return self.derive(INIT_NAME)(fn, **kwargs) if fn is not None else self.derive(INIT_NAME)(**kwargs)

    # -- args
    def update(
        self,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        args: Optional[Dict[str, Any]] = None,
    ) -> "DFTracerAI":
        """Sets args recorded by this tracer's events and all its children's."""
        values = dict(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size)
        values.update(args or {})
        for k, v in values.items():
            if v is None:
                continue
            if hasattr(v, "value") and callable(v.value):  # TagValue
                v = v.value()[1]
            self._args[k] = v
        for child in self._children.values():
            child.update(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, args=args)
        return self

    def enable(self) -> None:
        self._enabled = True
        for c in self._children.values():
            c.enable()

    def disable(self) -> None:
        self._enabled = False
        for c in self._children.values():
            c.disable()

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
        if fn is None:
            t = DFTracerAI(self._cat, self._name, enable=self._enabled if enable is None else enable)
            t._args = dict(self._args)
            t.update(epoch=epoch, step=step, image_idx=image_idx, image_size=image_size, args=args)
            return t
        if not callable(fn):
            raise TypeError(f"{self._name}: expected a function to decorate, not {type(fn).__name__}")
        if not self._on():
            return fn
        tracer = self

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
    def __enter__(self) -> "DFTracerAI":
        self._t0 = _native.get_time() if self._on() else None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._t0 is not None and self._on():
            _log(self._name, self._cat, self._t0, self._args)
        self._t0 = None

    def start(self, metadata: bool = False) -> None:
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
        )


class IO(DFTracerAI):
    """`<parent>.io` with children `open`, `read`, `write`, `close` (`<parent>.io.<op>`)."""

    def __init__(self, cat: Any, parent_name: str, enable: bool = True, **kw: Any) -> None:
        io_name = f"{parent_name}{CTX_SEPARATOR}io"
        super().__init__(cat, io_name, enable=enable, **kw)
        self.create_children({str(e): f"{io_name}{CTX_SEPARATOR}{e}" for e in IOEvent})


def _category(cls_name: str, cat: ProfileCategory, events: Any, io: bool, names: Optional[Dict[str, str]] = None) -> type:
    def __init__(self: DFTracerAI, enable: bool = True, **kw: Any) -> None:
        DFTracerAI.__init__(self, cat, cat, enable=enable, **kw)
        self.create_children(names or {str(e): str(e) for e in events})
        if io:
            self.io = IO(cat, str(cat), enable=enable)
            self._children["io"] = self.io

    return type(cls_name, (DFTracerAI,), {"__init__": __init__, "__doc__": f"Category `{cat}`."})


Compute = _category("Compute", ProfileCategory.COMPUTE, ComputeEvent, io=False)
Data = _category("Data", ProfileCategory.DATA, DataEvent, io=True)
DataLoader = _category("DataLoader", ProfileCategory.DATALOADER, DataLoaderEvent, io=False)
Communication = _category("Communication", ProfileCategory.COMM, CommunicationEvent, io=False)
Device = _category("Device", ProfileCategory.DEVICE, DeviceEvent, io=False)
Checkpoint = _category("Checkpoint", ProfileCategory.CHECKPOINT, CheckpointEvent, io=True)
Pipeline = _category("Pipeline", ProfileCategory.PIPELINE, PipelineEvent, io=False)
Other = _category("Other", ProfileCategory.OTHER, OtherEvent, io=True, names={"log": f"{ProfileCategory.OTHER}{CTX_SEPARATOR}{OtherEvent.LOG}"})


class AI(DFTracerAI):
    """The root: `compute`, `data`, `dataloader`, `comm`, `device`, `checkpoint`, `pipeline`,
    `other`; `update()` here reaches every tracer."""

    def __init__(self, enable: bool = True, **kw: Any) -> None:
        super().__init__(ROOT_CAT, ROOT_NAME, enable=enable, **kw)
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
            child = cls(enable=enable, **kw)
            setattr(self, attr, child)
            self._children[attr] = child


ai = AI()
