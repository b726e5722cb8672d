"""ddphooks for PyTorch.

    import ddphooks.torch
    ddp = DistributedDataParallel(model)
    hook = ddphooks.torch.register(ddp, "configs/powersgd.yaml")

- ``register``, ``sharded_optimizer``, ``optimizer_in_backward``: a ddph hook
  as DDP's comm hook (ddp.py);
- ``ProcessGroupComm``: the collectives of ``comm: {backend: host}`` on a
  torch.distributed process group (process_group_comm.py).

Works with PyTorch 1.13 and 2.x (docs/python.md).
"""
from .ddp import (LEGACY_STATE_KEY, DDPHook, caching_allocator, optimizer_in_backward,
                  register, sharded_optimizer)
from .process_group_comm import ProcessGroupComm

__all__ = ["register", "DDPHook", "ProcessGroupComm", "sharded_optimizer",
           "optimizer_in_backward", "caching_allocator", "LEGACY_STATE_KEY"]
