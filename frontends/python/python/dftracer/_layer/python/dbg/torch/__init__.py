"""`dftracer.python.dbg.torch`: `dftracer.python.torch`'s `trace_handler`, each call on stderr."""

from dftracer.python.dbg.torch.profiler import *  # noqa: F401,F403
from dftracer.python.dbg.torch.profiler import __all__  # noqa: F401
