"""`dftracer.python.dbg.torch`: `dftracer.python.torch`'s `trace_handler`, each call on stderr."""

from dftracer.dftracer_dbg import logged
from dftracer.python.torch import trace_handler as _trace_handler

trace_handler = logged("trace_handler", _trace_handler)
__all__ = ["trace_handler"]
