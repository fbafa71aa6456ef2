"""`dftracer.python.ai_init`: the `ai` singleton and its categories (pydftracer 2.0.6's
`ai_init`): `ai = AI()`, `compute = ai.compute`, `data`, `dataloader`, `device`, `comm`,
`checkpoint`, `pipeline`."""

from dftracer.python.ai_common import *  # noqa: F401,F403
from dftracer.python.ai_common import AI

ai = AI()
comm = ai.comm
compute = ai.compute
data = ai.data
dataloader = ai.dataloader
device = ai.device
checkpoint = ai.checkpoint
pipeline = ai.pipeline

# What `from dftracer.python.ai_init import *` gives (pydftracer's list).
__all__ = [
    "INIT_NAME",
    "ITER_COUNT_NAME",
    "CommunicationEvent",
    "CheckpointEvent",
    "ComputeEvent",
    "DataEvent",
    "DataLoaderEvent",
    "DeviceEvent",
    "IOEvent",
    "PipelineEvent",
    "ProfileCategory",
    "ai",
    "checkpoint",
    "comm",
    "compute",
    "data",
    "dataloader",
    "device",
    "get_iter_block_name",
    "get_iter_handle_name",
    "pipeline",
]
