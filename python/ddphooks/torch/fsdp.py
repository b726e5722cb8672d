"""FSDP2 (``fully_shard``) with a ddph hook as its gradient reduce-scatter.

    from torch.distributed.fsdp import fully_shard
    import ddphooks.torch.fsdp
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    handle = ddphooks.torch.fsdp.compress(model, "configs/quantization_rs8.yaml")

FSDP2 has no comm hooks; it has a slot for a custom reduce-scatter
(``FSDPModule.set_custom_reduce_scatter``). compress() fills the slot of
every FSDP module of the model: each reduce-scatter input (world rows, one
per rank's shard) goes through the config's hook as one bucket, which
leaves the mean of every rank's gradients at least in this rank's row
(quantization's protocol shard computes that row only), and the row is
FSDP's output. The hook's state (quantization's error feedback) is the
handle's ``state_dict()``: save it beside the model's in the checkpoint
and give it back with ``load_state_dict()`` (each rank its own).

``weights=`` (a config of ``quantization/per_channel_gather``) quantizes
the weights FSDP2 all-gathers too (ZeRO++'s qwZ), through its custom
all-gather slot (``FSDPModule.set_custom_all_gather``): a second ddph
session gathers each rank's shard as 8-bit (or 4-bit) per-channel codes and
every rank decodes every shard, its own too, so all ranks compute with the
same weights. The sharded fp32 parameters the optimizer steps are not
touched. The weight hook keeps no state: nothing of it goes into a
checkpoint.
"""
import contextlib

import torch
import torch.distributed as dist

from .. import _abi, errors
from ..session import Session
from . import _compat
from .._config import families as _families
from ._session_handle import SessionHandle, default_store, hook_label, outer_hook
from .process_group_comm import ProcessGroupComm

__all__ = ["compress", "FSDPCompressor"]

# The families whose hooks leave the mean of the ranks' gradients in the
# bucket, element for element, which is what a reduce-scatter must give.
MEAN_FAMILIES = {"default": "allreduce, fp16_compress, bf16_compress",
                 "quantization": "per_channel, per_tensor"}
# The hooks that serve FSDP2's all-gather (weights=): gather rows, no mean.
GATHER_HOOKS = {("quantization", "per_channel_gather")}


def _refuse(text):
    raise errors.DDPHError(errors.Code.UNSUPPORTED, "ddphooks.torch.fsdp: " + text)


def _is_avg(op):
    try:
        return op == dist.ReduceOp.AVG
    except Exception:  # a PREMUL_SUM ReduceOp does not compare with the enum
        return False


class FSDPCompressor(SessionHandle):
    """What compress() returns: the session behind the reduce-scatters.
    ``state_dict()``/``load_state_dict()`` hold the hook's state; ``stats()``,
    ``metrics()``, ``spans()`` as for DDP (each call is a step of the
    session); ``close()`` gives FSDP its own reduce-scatter back."""

    def __init__(self, session, group, modules, row_multiple=1):
        super().__init__(session)
        # weights=: the all-gather's session and its call count.
        self.weights = None
        self.gathers = 0
        self.weights_label = "ddph"
        self.group = group
        self.world, self.rank = group.size(), group.rank()
        self.calls = 0
        self._modules = modules
        # Protocol shard needs each rank's row to be whole channels: a row
        # of another length goes through a copy padded with zeros.
        self._row_multiple = row_multiple
        self._padded = {}

    def _reduce_scatter(self, index, output, input, group, op):
        if not _is_avg(op):
            _refuse("FSDP asked for a reduce-scatter with op %s; the hook gives the mean (AVG): "
                    "set_gradient_divide_factor and a non-fp32 reduce dtype need FSDP's own" % op)
        if group.size() != self.world or group.rank() != self.rank:
            _refuse("the reduce-scatter group (rank %d of %d) is not the one compress() joined "
                    "(rank %d of %d)" % (group.rank(), group.size(), self.rank, self.world))
        if input.dtype != torch.float32 or output.dtype != torch.float32:
            _refuse("reduce dtype %s: the hook reduces float32 gradients" % input.dtype)
        if input.numel() != output.numel() * self.world:
            _refuse("the input holds %d elements, not world x output (%d x %d)" %
                    (input.numel(), self.world, output.numel()))
        row = output.numel()
        bucket = input
        padded_row = -(-row // self._row_multiple) * self._row_multiple
        if padded_row != row:
            rows = self._padded.get(index)
            if rows is None or rows.shape != (self.world, padded_row):
                rows = self._padded[index] = input.new_zeros(self.world, padded_row)
            rows[:, :row].copy_(input.view(self.world, row))
            bucket = rows.view(-1)
        profiled = contextlib.nullcontext()
        self._clock_marks.mark_if_profiling(self._session_steps)
        if torch.autograd._profiler_enabled():  # the range torch.profiler shows
            profiled = torch.autograd.profiler.record_function(
                "%s reduce-scatter %d" % (self.label, index),
                "call %d, %d bytes" % (self.calls, bucket.numel() * bucket.element_size()))
        with profiled:
            self.session.run(bucket, index=index, is_last=True, step=self.calls)
        self.calls += 1
        self._session_steps += 1
        output.copy_(bucket.view(self.world, -1)[self.rank, :row])
        return None

    def _all_gather(self, index, output, input, group):
        """FSDP's all-gather: `input` is this rank's row of `output` (world
        rows), already filled; every row becomes its rank's decoded codes.
        The hook takes rows of any length (a row's last channel may be
        shorter), so `output` is the bucket, without a copy."""
        if group.size() != self.world or group.rank() != self.rank:
            _refuse("the all-gather group (rank %d of %d) is not the one compress() joined "
                    "(rank %d of %d)" % (group.rank(), group.size(), self.rank, self.world))
        if output.dtype != torch.float32:
            _refuse("FSDP all-gathers %s; the weight hook gathers float32" % output.dtype)
        row = input.numel()
        if output.numel() != row * self.world:
            _refuse("the all-gather output holds %d elements, not world x input (%d x %d)" %
                    (output.numel(), self.world, row))
        own = output.view(self.world, row)[self.rank]
        if input.data_ptr() != own.data_ptr():  # FSDP fills it in place; else copy
            own.copy_(input)
        profiled = contextlib.nullcontext()
        if torch.autograd._profiler_enabled():
            profiled = torch.autograd.profiler.record_function(
                "%s all-gather %d" % (self.weights_label, index),
                "call %d, %d bytes" % (self.gathers, row * output.element_size()))
        with profiled:
            self.weights.run(output, index=index, is_last=True, step=self.gathers)
        self.gathers += 1
        return None

    def weight_stats(self):
        """The weight all-gather's stats (weights=), or None: bytes_in counts
        this rank's rows, bytes_out the codes it sent."""
        return self.weights.stats() if self.weights is not None else None

    def state_dict(self):
        """{"calls": int, "state": bytes}: save it with the model's checkpoint."""
        return {"calls": self.calls, "state": self.session.state_dict()}

    def load_state_dict(self, state):
        self.session.load_state_dict(state["state"])
        self.calls = _abi.checked_int(state["calls"], "state['calls']", _abi.UINT64)

    def close(self):
        for m in self._modules:
            m.set_custom_reduce_scatter(_fsdp_default_reduce_scatter())
            if self.weights is not None:
                m.set_custom_all_gather(_fsdp_default_all_gather())
        self._modules = []
        self.session.close()
        if self.weights is not None:
            self.weights.close()


def _fsdp_default_reduce_scatter():
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultReduceScatter
    return DefaultReduceScatter()


def _fsdp_default_all_gather():
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather
    return DefaultAllGather()


def _outer_hook(config):
    """(family, name) of the config's hook, and whether it has rules or a wrap."""
    doc, hook = outer_hook(config)
    if hook is None:
        return None, None, False
    return hook.get("family"), hook.get("name"), bool(doc.get("rules") or hook.get("wrap"))


def _check_weights_config(weights):
    family, name, extra = _outer_hook(weights)
    if (family, name) not in GATHER_HOOKS or extra:
        _refuse("weights: the hook %s/%s%s does not serve FSDP's all-gather; use %s" % (
            family, name, " with rules or a wrap" if extra else "",
            ", ".join("%s/%s" % h for h in sorted(GATHER_HOOKS))))


def _gather_dtype(fsdp_param):
    return fsdp_param.mp_policy.param_dtype or fsdp_param.sharded_param.dtype


def _check_weights_group(m, g):
    """What the weight hook cannot serve in param group g of module m."""
    name = type(m).__name__
    if g.post_forward_mesh_info is not None and g.post_forward_mesh_info is not g.mesh_info:
        _refuse("weights: %s reshards after forward to a smaller group (reshard_after_forward "
                "an int), whose backward all-gather is not the group compress() joins: use "
                "reshard_after_forward=True or False" % name)
    for p in g.fsdp_params:
        if hasattr(p._sharded_local_tensor, "fsdp_pre_all_gather"):
            _refuse("weights: %s's parameter %s all-gathers through its tensor subclass "
                    "(fsdp_pre_all_gather); the weight hook gathers float32 parameters" %
                    (name, p._param_fqn or p._module_info.param_name))
        if _gather_dtype(p) != torch.float32:
            _refuse("weights: %s all-gathers its parameters in %s (MixedPrecisionPolicy "
                    "param_dtype); the weight hook gathers float32: leave param_dtype unset "
                    "or torch.float32" % (name, _gather_dtype(p)))


def _row_multiple(config):
    """What each rank's row must be a multiple of for the config's hook:
    quantization's protocol shard cuts the bucket into world equal ranges of
    whole channels (channel_size, 512 by default; 1 for per_tensor)."""
    _, hook = outer_hook(config)
    options = (hook or {}).get("options") or {}
    if hook is None or options.get("protocol") != "shard":
        return 1
    if hook.get("name") == "per_tensor":
        return 1
    return int(options.get("channel_size", 512)) or 1


def _reduce_dtype(fsdp_param):
    mp = fsdp_param.mp_policy
    return mp.reduce_dtype or mp.param_dtype or fsdp_param.sharded_param.dtype


def compress(model, config, *, weights=None, store=None, rendezvous="host"):
    """Puts the ddph hook that `config` names (YAML path, text or dict) under
    every FSDP module of `model` as its reduce-scatter; returns an
    FSDPCompressor. With `weights` (a config of quantization/
    per_channel_gather) a second session serves every module's all-gather
    of the weights too. Collective: every rank calls it, after fully_shard
    and before the first forward.

    Refused by name (ddphooks.errors.DDPHError): a model without fully_shard,
    a hook that does not give the mean (only the default and quantization
    families do), a reduce dtype other than float32 (MixedPrecisionPolicy),
    an HSDP (2-D) mesh, FSDP modules on different groups; for `weights`: a
    hook other than the gather hook, a param_dtype other than float32, a
    tensor subclass's own all-gather, reshard_after_forward as an int.
    """
    parts = _compat.fsdp2()
    if parts is None:
        _refuse("FSDP2 (fully_shard) is PyTorch 2's; this is PyTorch %s" % torch.__version__)
    FSDPModule, ReduceScatter, HSDPMeshInfo = parts
    AllGather = _compat.fsdp2_all_gather()
    if weights is not None and AllGather is None:
        _refuse("weights: this PyTorch (%s) has no FSDPModule.set_custom_all_gather" %
                torch.__version__)
    if not isinstance(model, FSDPModule):
        _refuse("%s is not a fully_shard model: call fully_shard(model) first" %
                type(model).__name__)
    families = _families(config)
    if _outer_hook(config)[:2] in GATHER_HOOKS:
        _refuse("%s/%s gathers rows and gives no mean: it serves FSDP's all-gather, as "
                "compress(model, config, weights=...); the gradients need one of %s" %
                (_outer_hook(config)[:2] + ("; ".join("%s (%s)" % kv
                                                      for kv in MEAN_FAMILIES.items()),)))
    if weights is not None:
        _check_weights_config(weights)
    wrong = sorted(families - set(MEAN_FAMILIES))
    if wrong or not families:
        _refuse("the hook family %s does not give the ranks' mean per element, which a "
                "reduce-scatter must; use %s" % (", ".join(wrong) or "(none named)",
                                                   "; ".join("%s (%s)" % kv for kv in
                                                             MEAN_FAMILIES.items())))
    modules, group = [], None
    for m in model.modules():
        if not isinstance(m, FSDPModule):
            continue
        state = m._get_fsdp_state()
        groups = [g for g in state._fsdp_param_groups if g is not None]
        if not groups:
            continue  # a module without parameters of its own reduces nothing
        for g in groups:
            if isinstance(g.mesh_info, HSDPMeshInfo):
                _refuse("%s is sharded on a 2-D (HSDP) mesh, whose replicate all-reduce is "
                        "FSDP's own: use a 1-D mesh" % type(m).__name__)
            for p in g.fsdp_params:
                if _reduce_dtype(p) != torch.float32:
                    _refuse("%s reduces in %s (MixedPrecisionPolicy); the hook reduces float32 "
                            "gradients: set reduce_dtype=torch.float32" %
                            (type(m).__name__, _reduce_dtype(p)))
            if weights is not None:
                _check_weights_group(m, g)
            pg = g.mesh_info.shard_process_group
            if group is None:
                group = pg
            elif pg is not group:
                _refuse("the model's FSDP modules shard over different process groups")
        modules.append(m)
    if group is None:
        _refuse("%s has no sharded parameters" % type(model).__name__)
    if store is None and rendezvous == "host":
        store = default_store("ddphooks/fsdp/")
    session = Session(config, rank=group.rank(), world_size=group.size(), rendezvous=rendezvous,
                      store=store, comm=ProcessGroupComm(group))
    handle = FSDPCompressor(session, group, modules, _row_multiple(config))
    handle.label = hook_label(config)
    if weights is not None:
        wstore = store
        if store is None and rendezvous == "host":
            wstore = default_store("ddphooks/fsdp/weights/")
        try:
            handle.weights = Session(weights, rank=group.rank(), world_size=group.size(),
                                     rendezvous=rendezvous, store=wstore,
                                     comm=ProcessGroupComm(group))
        except BaseException:
            session.close()
            raise
        handle.weights_label = hook_label(weights)

    class _Slot(ReduceScatter):
        def __init__(self, index):
            self.index = index

        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            return handle._reduce_scatter(self.index, output_tensor, input_tensor, group, op)

    class _GatherSlot(AllGather):
        def __init__(self, index):
            self.index = index

        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            return handle._all_gather(self.index, output_tensor, input_tensor, group)

    for index, m in enumerate(modules):
        m.set_custom_reduce_scatter(_Slot(index))
        if weights is not None:
            m.set_custom_all_gather(_GatherSlot(index))
    return handle
