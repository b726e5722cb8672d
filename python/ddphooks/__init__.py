"""ddphooks: gradient communication hooks behind a stable C ABI, from Python.

    import numpy as np, ddphooks
    with ddphooks.Session("configs/allreduce.yaml", rank=r, world_size=2) as s:
        s.run(grad)              # averaged across ranks, in place

PyTorch DDP: ``ddphooks.torch.register(ddp_model, config)`` (docs/python.md).
Pure Python over ctypes; libddph.so is found through DDPH_LIBRARY, beside the
package, in the install prefix, or in a build tree (ddphooks._library).
"""
from .allocator import DeviceAllocator
from .errors import Code, DDPHError
from .metrics import CSV_COLUMNS, BucketMetrics, MetricsWriter, StepMetrics
from .session import Session, new_job_id, version
from .store import HostStore
from ._library import path as library_path

__all__ = ["BucketMetrics", "CSV_COLUMNS", "Code", "DDPHError", "DeviceAllocator", "HostStore",
           "MetricsWriter", "Session", "StepMetrics", "library_path", "new_job_id", "version"]
__version__ = "0.1.0"
