"""`dftracer.python.dynamo`: `torch.compile` backends that record every op of every compiled
graph (pydftracer 2.0.6's `dynamo` module: `Dynamo`, `dynamo`, `create_backend`).

    from dftracer.python.dynamo import dynamo, create_backend

    model = dynamo.compile(model)                              # torch.compile + our backend
    model = torch.compile(model, backend=create_backend())     # the same, named explicitly

The backend inserts a timer before and after each `call_module`, `call_function` and
`call_method` node of the FX graph it is given, so each op run records one event of category
`dynamo` named as pydftracer names it (`function.<name>`, `method.<name>`,
`<module path>.<ModuleType>_<path with _>`) with `grad_enabled` (0/1) and the tracer's args
(`epoch`, `step`, ... when given). With `autograd=True` (the default) the graphs are AOT
Autograd's forward and backward aten graphs, otherwise Dynamo's own graph.

Beyond pydftracer: each run of a compiled graph also records one event enclosing its ops,
named `graph.forward`, `graph.backward` or `graph.inference` (autograd off), with `graph_id`
(the order in which this tracer compiled it) and `ops` (how many ops it records), so a
trace shows which ops belong to one call. `used.dynamo` is marked in the `end` record when a
backend is first made with tracing on (pydftracer marks it when the module is imported).
With tracing off, `dynamo.compile(f)` returns `f` itself (as pydftracer: nothing compiled)
and a backend made by `create_backend` runs the graph untouched.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from dftracer import dftracer as _native
from dftracer.python.ai_common import DFTracerAI, dftracer
from dftracer.python.common import DFTRACER_ENABLE, P, R, TagDType, TagType, TagValue  # noqa: F401 (pydftracer's names here)

try:
    import torch

    TORCH_AVAILABLE = True
except ImportError:
    torch = None  # type: ignore[assignment]
    TORCH_AVAILABLE = False

make_boxed_func: Any = None
aot_autograd: Any = None
if TORCH_AVAILABLE:
    try:
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd
    except ImportError:  # a torch without AOT Autograd: autograd=True raises when used
        pass

__all__ = ["Dynamo", "dynamo", "create_backend"]

CAT_DYNAMO = "dynamo"
_TRACED_OPS = ("call_module", "call_function", "call_method")


@dataclass
class CallStackRecord:
    """An op started and not yet ended (pydftracer's record; kept for code that imports it)."""

    op_name: str
    op_type: str
    target: str
    timestamp_us: int
    grad_enabled: bool


def create_detailed_op_name(node: Any, gm: Any) -> str:
    """The event name of an FX node, as pydftracer names it."""
    dotted = str(node.target).replace(".", "_")
    if node.op == "call_module":
        kind = type(gm.get_submodule(node.target)).__name__
        return f"{node.target}.{kind}_{dotted}"
    if node.op == "call_function":
        return "function." + getattr(node.target, "__name__", str(node.target))
    if node.op == "call_method":
        return "method." + dotted
    return f"{node.op}.{dotted}"


def _require_torch(autograd: bool) -> None:
    if not TORCH_AVAILABLE:
        raise RuntimeError("PyTorch is not available. Install PyTorch to use Dynamo integration.")
    if autograd and (aot_autograd is None or make_boxed_func is None):
        raise RuntimeError(
            "AOT autograd is not available. Either install required dependencies or set autograd=False"
        )


def _ints(args: dict) -> dict:
    return {k: int(v) for k, v in args.items() if isinstance(v, (bool, int))}


class Dynamo(DFTracerAI):
    """A tracer of category `dynamo` whose `compile()` and backends record ops."""

    def __init__(
        self,
        name: Optional[str] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
        image_idx: Optional[int] = None,
        image_size: Optional[Any] = None,
        enable: bool = True,
    ) -> None:
        super().__init__(cat=CAT_DYNAMO, name=name, epoch=epoch, step=step, image_idx=image_idx,
                         image_size=image_size, enable=enable)
        self.call_stack: List[CallStackRecord] = []
        self._graph_ids = itertools.count()

    def reset(self) -> None:
        super().reset()
        self.call_stack.clear()

    def _recording(self) -> bool:
        return bool(self._enabled and _native.is_enabled())

    def _mark_used(self) -> None:
        if self._recording():
            dftracer.get_instance().mark_used("dynamo")

    # -- what the instrumented graph calls
    def _op_start(self) -> int:
        return _native.get_time()

    def _op_end(self, op_name: str, t0: int) -> None:
        t1 = _native.get_time()
        args = _ints(self._args)
        args["grad_enabled"] = int(torch.is_grad_enabled())
        strings = {k: str(v) for k, v in self._args.items() if not isinstance(v, (bool, int, float))}
        _native.log_event(op_name, self.cat, t0, max(t1 - t0, 0), args, strings or None, None)

    def add_enhanced_timing_to_graph(self, gm: Any) -> Any:
        """Puts a timer around each op node of `gm` (in place) and recompiles it."""
        graph = gm.graph
        for node in [n for n in graph.nodes if n.op in _TRACED_OPS]:
            op_name = create_detailed_op_name(node, gm)
            with graph.inserting_before(node):
                t0 = graph.call_function(self._op_start, ())
            with graph.inserting_after(node):
                graph.call_function(self._op_end, (op_name, t0))
        gm.recompile()
        return gm

    def _compiler(self, kind: str, boxed: bool) -> Callable[..., Any]:
        """A backend (or AOT Autograd's forward/backward compiler) for graphs of `kind`."""

        def compile_graph(gm: Any, example_inputs: Any, **_kw: Any) -> Any:
            if not self._recording():
                return make_boxed_func(gm.forward) if boxed else gm.forward
            ops = sum(1 for n in gm.graph.nodes if n.op in _TRACED_OPS)
            graph_id = next(self._graph_ids)
            forward = self.add_enhanced_timing_to_graph(gm).forward
            name = f"graph.{kind}"

            def run_graph(*args: Any) -> Any:
                t0 = _native.get_time()
                try:
                    return forward(*args)
                finally:
                    t1 = _native.get_time()
                    gargs = _ints(self._args)
                    gargs.update(graph_id=graph_id, ops=ops, grad_enabled=int(torch.is_grad_enabled()))
                    _native.log_event(name, self.cat, t0, max(t1 - t0, 0), gargs, None, None)

            return make_boxed_func(run_graph) if boxed else run_graph

        return compile_graph

    def backend(self, autograd: bool = True) -> Any:
        """A `torch.compile` backend recording into this tracer."""
        _require_torch(autograd)
        self._mark_used()
        if autograd:
            return aot_autograd(fw_compiler=self._compiler("forward", True),
                                bw_compiler=self._compiler("backward", True))
        return self._compiler("inference", False)

    def compile(self, f_py: Optional[Callable] = None, autograd: bool = True) -> Any:
        """`torch.compile(f, backend=<this tracer's backend>)`; a decorator too, with or
        without arguments. With tracing off, returns `f` itself."""
        _require_torch(autograd)
        if not self._recording():
            return f_py if f_py is not None else (lambda f: f)

        def decorate(func: Callable) -> Any:
            return torch.compile(func, backend=self.backend(autograd))

        return decorate(f_py) if callable(f_py) else decorate

    def count_parameters(self, module: Any) -> Optional[int]:
        """Number of parameters of a module (None for anything else)."""
        if hasattr(module, "parameters"):
            return int(sum(p.numel() for p in module.parameters()))
        return None


dynamo = Dynamo()


def create_backend(
    name: Optional[str] = None,
    epoch: Optional[int] = None,
    step: Optional[int] = None,
    image_idx: Optional[int] = None,
    image_size: Optional[Any] = None,
    enable: bool = True,
    autograd: bool = True,
) -> Any:
    """A `torch.compile` backend recording into a new `Dynamo` tracer with these args:
    `torch.compile(model, backend=create_backend(name="my_model", epoch=0))`."""
    _require_torch(autograd)
    return Dynamo(name=name, epoch=epoch, step=step, image_idx=image_idx,
                  image_size=image_size, enable=enable).backend(autograd)
