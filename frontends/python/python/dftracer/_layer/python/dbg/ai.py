"""`dftracer.python.dbg.ai`: the names of `dftracer.python.ai` (pydftracer 2.0.6's `dbg.ai`),
each call of a tracer written on stderr (see `dftracer.python.dbg`)."""

import importlib

_ai = importlib.import_module("dftracer.python.ai")  # the package attribute is the singleton
import dftracer.python.ai_common as ai_common  # noqa: F401
from dftracer.python.dbg._view import views

views(_ai, [n for n in _ai.__all__ if n != "ai_common"], globals())

__all__ = list(_ai.__all__)
