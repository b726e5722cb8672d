"""PyTorch DDP adapter: ddph hooks as a drop-in for ``register_comm_hook``.

    import ddphooks.torch
    ddp = DistributedDataParallel(model)
    hook = ddphooks.torch.register(ddp, "configs/powersgd.yaml")

Each GradBucket goes to the session zero-copy (its flat buffer, the
parameters with their offsets and shapes, is_last, the step and, for CUDA
tensors, the current stream); the returned torch.futures.Future completes
from the ddph completion callback. The communicator joins through
PyTorch's c10d store (``rendezvous: host``), or, with ``comm: {backend:
host}`` in the YAML, runs its collectives through the DDP process group
itself (ProcessGroupComm).

This module holds the entry points (register, sharded_optimizer,
optimizer_in_backward); the hook object is _ddp_hook.DDPHook, a bucket's
descriptors _ddp_bucket.py, the refusal of a second optimizer step
_second_steps.py.
"""
import torch
import torch.distributed as dist

from .. import errors
from .._config import families as _families, hooks as _hooks
from . import _compat, _optim
from ..allocator import DeviceAllocator
from ..session import Session
from ._ddp_hook import LEGACY_STATE_KEY, DDPHook
from ._session_handle import default_store, hook_label
from .process_group_comm import ProcessGroupComm

__all__ = ["register", "DDPHook", "sharded_optimizer", "optimizer_in_backward",
           "caching_allocator"]


PYTHON_REDUCER_REFUSAL = (
    "ddphooks.torch: DDP calls comm hooks once per parameter (hook(state, (grad, param))) when "
    "it is built under torch._dynamo.config.optimize_ddp = 'python_reducer'; ddph hooks reduce "
    "DDP's buckets. Build the DDP model under the default optimize_ddp ('ddp_optimizer'): "
    "torch.compile(ddp_model) then hands the hook every bucket (docs/python.md, torch.compile)")


def _ddph_comm_hook(state, bucket):
    """The comm hook registered on DDP; `state` is the DDPHook."""
    if isinstance(bucket, tuple):  # the python_reducer's per-parameter call
        raise errors.DDPHError(errors.Code.UNSUPPORTED, PYTHON_REDUCER_REFUSAL)
    return state._submit(bucket)


def caching_allocator():
    """PyTorch's CUDA caching allocator as a ddphooks DeviceAllocator, so the
    scratch of GPU buckets comes from the pool the model already uses.

    A block is taken on the bucket's stream and given back stream-ordered:
    the caching allocator reuses it on that stream only, after the work
    queued before the free (its usual rule for raw blocks).
    """
    def alloc(nbytes, device, stream):
        # stream 0 is the legacy default stream; None would mean the current one.
        return torch.cuda.caching_allocator_alloc(nbytes, device, stream)

    def free(ptr, device, stream):
        torch.cuda.caching_allocator_delete(ptr)

    return DeviceAllocator(alloc, free)


def register(ddp_model, config, *, process_group=None, store=None, rendezvous="host"):
    """Registers the ddph hook that `config` names on `ddp_model` (a
    DistributedDataParallel) and returns its DDPHook.

    config: YAML path, YAML text or dict (docs/config.md).
    process_group: the group whose ranks join the session and that
        ``comm: {backend: host}`` runs on; by default the DDP model's.
    store: the rendezvous store; by default torch.distributed's own c10d
        store (prefixed "ddphooks/"), so torchrun and init_process_group
        scripts need nothing more.
    rendezvous: "host" (the store above); None keeps the YAML's
        comm.rendezvous (file://, redis://, tcp:// or env://).

    A model on CUDA lends PyTorch's caching allocator (caching_allocator())
    for the scratch of its GPU buckets.

    Collective: every rank of the group must call it. Replaces any hook
    already registered (DDP allows one).

    Checkpoints: ``ddp_model.state_dict()`` holds the model only; save the
    returned hook's ``state_dict()`` beside it and give it back with
    ``load_state_dict()``. A checkpoint of an older version, whose
    ``ddp_model.state_dict()`` held the hook state under
    ``_ddph_hook_state``, still loads into a registered model.
    """
    if "mixed_precision" in _families(config):
        # allreduce_upcast writes fp32 gradients into ddph_param_t.data, which
        # this adapter lends as the parameters themselves: it would overwrite
        # the weights. PyTorch 1.13's DDP has no low-precision buckets of fp32
        # parameters for it to serve anyway.
        raise errors.DDPHError(errors.Code.UNSUPPORTED,
                               "ddphooks.torch: the mixed_precision family expects the host to "
                               "lend fp32 gradients in ddph_param_t.data; DDP lends parameters "
                               "there (and PyTorch 1.13's DDP has no mixed-precision buckets)")
    if ("quantization", "per_channel_gather") in _hooks(config):
        raise errors.DDPHError(errors.Code.UNSUPPORTED,
                               "ddphooks.torch: quantization/per_channel_gather gathers rows and "
                               "gives no mean, which a DDP gradient hook must; it serves FSDP2's "
                               "weight all-gather (ddphooks.torch.fsdp.compress(model, config, "
                               "weights=...)): use per_channel or per_tensor")
    if _compat.ddp_uses_python_reducer(ddp_model):
        raise errors.DDPHError(errors.Code.UNSUPPORTED, PYTHON_REDUCER_REFUSAL)
    pg = process_group if process_group is not None else getattr(ddp_model, "process_group",
                                                                   None)
    if pg is None:
        pg = dist.distributed_c10d._get_default_group()
    if store is None and rendezvous == "host":
        store = default_store("ddphooks/")
    comm = ProcessGroupComm(pg)
    on_cuda = any(p.is_cuda for p in ddp_model.module.parameters())
    session = Session(config, rank=pg.rank(), world_size=pg.size(), rendezvous=rendezvous,
                      store=store, comm=comm,
                      device_allocator=caching_allocator() if on_cuda else None)
    param_index = {p.data_ptr(): i for i, p in enumerate(ddp_model.module.parameters())}
    hook = DDPHook(session, pg, comm, param_index)
    hook.label = hook_label(config)

    def load_legacy_state(state_dict, prefix, local_metadata, strict, missing_keys,
                          unexpected_keys, error_msgs):
        t = state_dict.pop(prefix + LEGACY_STATE_KEY, None)
        if t is not None:
            hook._from_legacy_tensor(t)
            hook._state_loaded = True
        hook._model_loaded = True

    ddp_model._register_load_state_dict_pre_hook(load_legacy_state)
    ddp_model.register_comm_hook(hook, _ddph_comm_hook)
    return hook


def _optimizer_config(family, name, optimizer, options, wrap, comm):
    optimizer, options = _optim.ddph_options(optimizer, options)
    opts = dict(options, optimizer=optimizer)
    return {"comm": comm or {"backend": "host"},
            "hook": {"family": family, "name": name, "options": opts,
                     "wrap": wrap or {"family": "default", "name": "allreduce"}}}


def sharded_optimizer(ddp_model, optimizer="adamw", *, protocol="reduce_scatter",
                      interleaved=True, wrap=None, comm=None, **options):
    """ZeroRedundancyOptimizer overlapped with DDP: registers the zero hook
    on ``ddp_model`` and returns its DDPHook. Each rank keeps and steps the
    optimizer state of 1/world of the parameters as their gradients are
    reduced, and the updated parameters are shared; do not call an
    optimizer's step() for these parameters.

    optimizer: "sgd", "adam" or "adamw" (or torch.optim.SGD, Adam, AdamW);
    options: its torch.optim options (betas=(b1, b2) too) by the ddph names (lr, weight_decay, momentum, beta1, beta2, eps, amsgrad,
    ...; docs/zero.md). protocol: "reduce_scatter" (ZeRO-2: one allreduce's
    bytes) or "allreduce" (PyTorch's scheme: the wrapped hook reduces, the
    owners broadcast). interleaved: step each bucket as it is reduced
    (zero_step_interleaved) or all at the step's last bucket (zero_step).
    wrap: the hook that reduces under protocol allreduce (default/allreduce
    by default). comm: the YAML comm section; by default DDP's own process
    group. A torch.optim step of these parameters raises DDPHError (PyTorch
    2): they would move twice. Checkpoints: ``hook.state_dict()`` is this rank's shard;
    ``DDPHook.consolidate([...every rank's...])`` joins them into one that
    loads at any world size."""
    name = "zero_step_interleaved" if interleaved else "zero_step"
    cfg = _optimizer_config("zero", name, optimizer, dict(options, protocol=protocol), wrap, comm)
    hook = register(ddp_model, cfg)
    hook._refuse_steps_of(ddp_model, ddp_model.module.parameters(),
                          "ddphooks.torch.sharded_optimizer")
    return hook


def optimizer_in_backward(ddp_model, optimizer="sgd", *, wrap=None, comm=None, **options):
    """Steps ``optimizer`` on each bucket's parameters right after the
    bucket is reduced, during the backward (hook_then_optimizer): registers
    it on ``ddp_model`` and returns its DDPHook; do not call an optimizer's
    step() for these parameters. optimizer: "sgd", "adam", "adamw" or
    torch.optim.SGD, Adam, AdamW. options: the optimizer's options (torch's
    names, betas=(b1, b2) too) and the hook's own (docs/optimizer_overlap.md); wrap: the hook
    that reduces (default/allreduce by default); comm: the YAML comm section,
    by default DDP's own process group.

    As with torch.distributed.optim._apply_optimizer_in_backward, each
    parameter's .grad is None after a synchronized backward (its step is
    done), so no zero_grad() is needed; with a ``params`` subset the
    gradients are left to the caller."""
    cfg = _optimizer_config("optimizer_overlap", "hook_then_optimizer", optimizer, options, wrap,
                            comm)
    hook = register(ddp_model, cfg)
    if "params" not in options:  # every parameter is stepped in the backward
        hook._clear_grads_of = [p for p in ddp_model.module.parameters() if p.requires_grad]
        hook._refuse_steps_of(ddp_model, hook._clear_grads_of,
                              "ddphooks.torch.optimizer_in_backward")
    return hook
