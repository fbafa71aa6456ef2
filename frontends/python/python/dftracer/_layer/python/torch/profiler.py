"""`dftracer.python.torch.profiler`: `trace_handler` and the names of `torch.common` (and
the module itself as `common`), as pydftracer 2.0.6 has them here."""

import dftracer.python.torch.common as common
from dftracer.python.torch.common import *  # noqa: F401,F403
from dftracer.python.torch.common import __all__ as _common_all

__all__ = list(_common_all) + ["common"]
