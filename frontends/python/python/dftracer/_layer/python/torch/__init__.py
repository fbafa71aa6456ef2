"""`dftracer.python.torch`: the PyTorch profiler's events in our trace (pydftracer 2.0.6's
profiler bridge).

    import torch
    from dftracer.python.torch import trace_handler

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                on_trace_ready=trace_handler):
        model(x)

Each event of the profiler's result becomes one event of category `PP` named by its key
(`aten::mm`, ...) with `device`, `cpu_memory`, `is_remote`, `device_memory_usage`,
`input_size` (the number of dimensions over all its inputs), `total_cpu_percent` and
`total_device_percent`, as pydftracer records them. Times are placed on our clock: the
profiler's offsets are relative to kineto's trace start (`trace_start_ns()`, wall-clock
nanoseconds, the clock our timestamps count in), converted to `DFTRACER_TIME_METRIC`'s unit.
`used.torch_profiler` is marked in the `end` record when the handler first runs.
"""

from dftracer.python.torch.profiler import *  # noqa: F401,F403
from dftracer.python.torch.profiler import __all__  # noqa: F401
