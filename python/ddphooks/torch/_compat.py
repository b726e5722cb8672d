"""What differs between the PyTorch versions ddphooks.torch supports:
Debian's 1.13 and the newest 2.x (python/requirements-torch-latest.txt).
Every version switch of the package is a function here, so the rest reads
as one version's code."""
import re

import torch


def _release(text):
    """(major, minor) of a version string such as "2.15.0+cu132"."""
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


TORCH_RELEASE = _release(torch.__version__)


def at_least(major, minor=0):
    """Whether the running PyTorch is major.minor or newer."""
    return TORCH_RELEASE >= (major, minor)


def ddp_uses_python_reducer(ddp_model):
    """Whether DDP was built under torch._dynamo.config.optimize_ddp =
    "python_reducer" (PyTorch 2.x; 1.13 has no such path): DDP then calls
    its comm hooks once per parameter, as hook(state, (grad, param)), from
    compiled autograd, not once per GradBucket."""
    return bool(getattr(ddp_model, "_use_python_reducer", False))


def register_optimizer_step_pre_hook(fn):
    """fn(optimizer, args, kwargs) before every torch.optim step, through
    torch.optim's global step pre-hooks (PyTorch 2): its handle, or None on
    1.13, which has none."""
    from torch.optim import optimizer
    register = getattr(optimizer, "register_optimizer_step_pre_hook", None)
    return register(fn) if register is not None else None


def fsdp2():
    """FSDP2's pieces the adapter uses (PyTorch 2: fully_shard, its
    ReduceScatter slot and mesh kinds), or None on 1.13, which has no FSDP2."""
    try:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter
        from torch.distributed.fsdp._fully_shard._fsdp_common import HSDPMeshInfo
    except ImportError:
        return None
    return FSDPModule, ReduceScatter, HSDPMeshInfo


def fsdp2_all_gather():
    """FSDP2's AllGather slot class (FSDPModule.set_custom_all_gather), or
    None where this PyTorch has no custom all-gather."""
    try:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather
    except ImportError:
        return None
    return AllGather if hasattr(FSDPModule, "set_custom_all_gather") else None
