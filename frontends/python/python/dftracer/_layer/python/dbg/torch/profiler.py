"""`dftracer.python.dbg.torch.profiler`: `dftracer.python.torch.profiler`'s names, each call
of `trace_handler` written on stderr (pydftracer 2.0.6's `dbg.torch.profiler`)."""

import dftracer.python.torch.common as common
from dftracer.dftracer_dbg import logged
from dftracer.python.torch.common import TagDType, TagType, TagValue, dftracer, get_time_scale  # noqa: F401
from dftracer.python.torch.common import trace_handler as _trace_handler

trace_handler = logged("trace_handler", _trace_handler)
__all__ = ["TagDType", "TagType", "TagValue", "get_time_scale", "dftracer", "trace_handler", "common"]
