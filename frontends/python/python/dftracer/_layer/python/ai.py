"""`dftracer.python.ai`: annotations for AI workloads (pydftracer 2.0.6's `ai` module): every
name of `ai_common` (the tracer classes, the `*Event` enums, the name constants) and of
`ai_init` (the singleton `ai` and its categories `compute`, `data`, ...). See `ai_common`'s
docstring for how they are used and where they differ from pydftracer's.

    from dftracer.python.ai import ai, compute

    @compute.forward
    def forward(batch): ...
"""

import dftracer.python.ai_common as ai_common
from dftracer.python.ai_common import *  # noqa: F401,F403
from dftracer.python.ai_common import __all__ as _common_all
from dftracer.python.ai_init import *  # noqa: F401,F403
from dftracer.python.ai_init import __all__ as _init_all
from dftracer.python.common import dft_fn as dft_fn_orig  # pydftracer's names for them here
from dftracer.python.common import dftracer as dftracer_orig

__all__ = list(dict.fromkeys(list(_common_all) + list(_init_all) + ["ai_common", "dft_fn_orig", "dftracer_orig"]))
