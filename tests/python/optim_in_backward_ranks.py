"""One rank of test_torch_optimizer_in_backward.py (started WORLD times).

    optim_in_backward_ranks.py RANK WORLD INIT_FILE OUT_DIR

Trains the parity model (parity_ranks.py: its seed, data and several DDP
buckets) with the optimizer stepped inside the backward, two ways:
  ref_<opt>    PyTorch: torch.distributed.optim._apply_optimizer_in_backward
               on the parameters, then DDP (allreduce only)
  ddph_<opt>   ddphooks.torch.optimizer_in_backward(ddp, <opt>, ...)
and, where PyTorch refuses a custom comm hook beside it, fp16 compression:
  ref_fp16_hook_refused   PyTorch's error for fp16_compress_hook + in-backward
  step_after_fp16_adamw   PyTorch's fp16_compress_hook, torch.optim.AdamW stepped
                          after backward (the formula ddph must match)
  ddph_fp16_adamw         optimizer_in_backward(ddp, "adamw", wrap=fp16_compress)
Saves the final parameters (or the error) to OUT_DIR/<case>.rank<R>.pt.
"""
import contextlib
import os
import sys

import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ranks  # noqa: E402
import ddphooks.torch  # noqa: E402

# Each optimizer: torch.optim's class and options, and the same by ddph's names.
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.001},
            {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.001}),
    # ddph takes torch.optim's spelling too: the class and betas (_optim.py).
    "adam": (torch.optim.Adam, {"lr": 0.003, "betas": (0.8, 0.99), "eps": 1e-7,
                                "weight_decay": 0.01},
             {"lr": 0.003, "betas": (0.8, 0.99), "eps": 1e-7, "weight_decay": 0.01}),
    "adamw": (torch.optim.AdamW, {"lr": 0.003, "weight_decay": 0.05},
              {"lr": 0.003, "weight_decay": 0.05}),
}
FP16 = {"family": "default", "name": "fp16_compress"}


def train(rank, setup, step_after=None):
    """setup(model, ddp) -> optional hook to close; step_after: an optimizer
    stepped after each backward (None: the step happens in the backward)."""
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = setup(model, ddp)
    opt = step_after(model.parameters()) if step_after else None
    for x, y in pr.batches(rank):
        nn.functional.mse_loss(ddp(x), y).backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:  # stepped in the backward, which must leave no gradient behind
            assert all(p.grad is None for p in model.parameters()), "gradients left after step"
    if isinstance(hook, ddphooks.torch.DDPHook):
        hook.close()
    return pr.flat_params(model)


class _NoStream:
    """What PyTorch's in-backward hook does with its stream, done on CPU,
    where every op runs in order: nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait_stream(self, other):
        pass


@contextlib.contextmanager
def cpu_streams():
    """PyTorch's in-backward DDP hook makes torch.Stream() and waits on
    torch.accelerator.current_stream(): in a CUDA build with no GPU both
    raise ("Found no NVIDIA driver"), so the reference could not run here
    at all. Stand-ins that do nothing, as a stream on CPU would."""
    if not hasattr(torch, "accelerator") or torch.accelerator.is_available():
        yield  # PyTorch 1.13 (no in-backward DDP hook to run), or a GPU
        return
    saved = torch.Stream, torch.accelerator.current_stream
    torch.Stream = lambda *a, **k: _NoStream()
    torch.accelerator.current_stream = lambda *a, **k: _NoStream()
    try:
        yield
    finally:
        torch.Stream, torch.accelerator.current_stream = saved


def pytorch_in_backward(cls, kwargs, comm_hook=None):
    from torch.distributed.optim import _apply_optimizer_in_backward

    def setup(model, ddp):
        _apply_optimizer_in_backward(cls, model.parameters(), optimizer_kwargs=kwargs)
        if comm_hook is not None:
            ddp.register_comm_hook(None, comm_hook)
    return setup


def reference(rank, setup):
    with cpu_streams():
        return train(rank, setup)


def cases():
    out = {}
    for name, (cls, kwargs, ddph_kwargs) in OPTIMIZERS.items():
        # DDP reads the parameters' in-backward optimizers at its first forward.
        out["ref_" + name] = lambda r, c=cls, k=kwargs: reference(r, pytorch_in_backward(c, k))
        out["ddph_" + name] = lambda r, o=(cls if name == "adam" else name), k=ddph_kwargs: train(
            r, lambda model, ddp: ddphooks.torch.optimizer_in_backward(ddp, o, **k))
    cls, kwargs, ddph_kwargs = OPTIMIZERS["adamw"]
    out["ref_fp16_hook_refused"] = lambda r: reference(
        r, pytorch_in_backward(cls, kwargs, default_hooks.fp16_compress_hook))
    out["step_after_fp16_adamw"] = lambda r: train(
        r, lambda model, ddp: ddp.register_comm_hook(None, default_hooks.fp16_compress_hook),
        step_after=lambda params: cls(params, **kwargs))
    out["ddph_fp16_adamw"] = lambda r: train(
        r, lambda model, ddp: ddphooks.torch.optimizer_in_backward(ddp, "adamw", wrap=FP16,
                                                                    **ddph_kwargs))
    return out


if __name__ == "__main__":
    ranks.run_cases({name: lambda rank, run=run: {"params": run(rank)}
                     for name, run in cases().items()}, sys.argv)
