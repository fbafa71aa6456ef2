"""`dftracer.python.torch.common`: the PyTorch profiler's handler `trace_handler` (see the
package's docstring), with pydftracer 2.0.6's names here: `TagValue`, `TagDType`, `TagType`,
`get_time_scale` and `dftracer` (the tracer class the handler records through; pydftracer's
`torch.profiler` assigns it)."""

from __future__ import annotations

from typing import Any, Optional

from dftracer import dftracer as _native
from dftracer.python.common import _TIME_METRIC_UNITS_PER_SECOND, TagDType, TagType, TagValue, get_time_scale  # noqa: F401
from dftracer.python.common import dftracer

__all__ = ["TagDType", "TagType", "TagValue", "get_time_scale", "dftracer", "trace_handler"]


def _scale() -> int:
    """Our time units per second (`DFTRACER_TIME_METRIC`)."""
    return int(get_time_scale())


def _trace_start(profiler_result: Any, scale: int) -> Optional[int]:
    """Kineto's trace start in our units, or None when this torch does not say."""
    results = getattr(getattr(profiler_result, "profiler", None), "kineto_results", None)
    for method, per_second in (("trace_start_ns", 1_000_000_000), ("trace_start_us", 1_000_000)):
        fn = getattr(results, method, None)
        if fn is None:
            continue
        try:
            start = fn()
        except Exception:  # torch versions differ; try the next name
            continue
        if start:
            return start * scale // per_second
    return None


def trace_handler(profiler_result: Any) -> None:
    """`torch.profiler.profile(on_trace_ready=trace_handler)`: writes the profiler's events
    into this process's trace."""
    if not _native.is_enabled():
        return
    dftracer.get_instance().mark_used("torch_profiler")
    scale = _scale()
    origin = _trace_start(profiler_result, scale)
    if origin is None:
        # No trace start from this torch: anchor at the tracer's start (as pydftracer does);
        # the events are then shifted earlier by the time between the two starts.
        origin = dftracer.get_instance().start_time or _native.get_time()
    for event in profiler_result.events():
        tr = event.time_range
        shapes = event.input_shapes
        _native.log_event(
            event.key,
            "PP",
            origin + int(tr.start * scale) // 1_000_000,
            int(tr.elapsed_us() * scale) // 1_000_000,
            {
                "device": int(event.device_type),
                "cpu_memory": int(event.cpu_memory_usage),
                "is_remote": int(event.is_remote),
                "device_memory_usage": int(event.device_memory_usage),
                "input_size": sum(len(s) for s in shapes) if shapes else 0,
            },
            None,
            {
                "total_cpu_percent": float(event.total_cpu_percent),
                "total_device_percent": float(event.total_device_percent),
            },
        )
