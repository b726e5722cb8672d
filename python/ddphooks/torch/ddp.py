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
"""
import ctypes
import threading
import warnings
import weakref

import torch
import torch.distributed as dist

from .. import _abi, _tensors, checkpoint, errors
from .._config import config_doc as _config_doc, families as _families, hooks as _hooks
from . import _compat, _optim, profiler as _profiler
from ..allocator import DeviceAllocator
from ..session import Session
from .process_group_comm import ProcessGroupComm

__all__ = ["register", "DDPHook", "sharded_optimizer", "optimizer_in_backward",
           "caching_allocator"]

# Where versions before the checkpoint change put the hook state inside
# ddp.state_dict(); such checkpoints still load (the key is taken out).
LEGACY_STATE_KEY = "_ddph_hook_state"


# --------------------------------------------------------------------------
# The DDP comm hook
# --------------------------------------------------------------------------

class _BucketDesc:
    """ctypes descriptors of one DDP bucket, reused while DDP keeps the same
    buffer and parameters (the loader copies them at each submit)."""

    __slots__ = ("key", "bucket", "keep")

    def __init__(self, key, buf, grads, params, ids):
        self.key = key
        keep = []
        elem = buf.element_size()
        base = buf.data_ptr()
        entries = []
        for g, p in zip(grads, params):
            data = None
            if p.is_contiguous():
                data = _abi.DLTensor()
                pshape = (ctypes.c_int64 * max(p.dim(), 1))(*p.shape)
                _tensors.fill_from_torch(data, p, pshape)
                data.ndim = p.dim()
                keep.append(pshape)
            entries.append(((g.data_ptr() - base) // elem, tuple(g.shape), data))
        bshape = (ctypes.c_int64 * 1)(buf.numel())
        keep.append(bshape)
        b = _abi.new(_abi.Bucket)
        _tensors.fill_from_torch(b.buffer, buf, bshape)
        # Each parameter's index in the model as its id: per-parameter state
        # (hook_then_optimizer) follows it when DDP rebuilds its buckets.
        _tensors.describe_params(b, entries, ids, keep)
        self.bucket = b
        self.keep = keep


def _key(buf, params):
    return (buf.data_ptr(), buf.numel(), buf.dtype, tuple(p.data_ptr() for p in params))


def _unwrap(fut):
    return fut.value()


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


class DDPHook:
    """What register() returns: the session behind the DDP hook.

    ``step``: synchronized steps so far (buckets with is_last; no_sync()
    steps do not count, as in PyTorch's hooks). ``state_dict()`` /
    ``load_state_dict()`` checkpoint the step and the hooks' state: save it
    beside ``ddp.state_dict()``, which stays the model's alone (so it loads
    into a plain model), e.g. ``{"model": ddp.state_dict(), "ddph":
    hook.state_dict()}``.
    """

    def __init__(self, session, process_group, comm, param_index):
        self.session = session
        # data_ptr of each model parameter -> its index in parameters(),
        # the id the loader hands the hooks (DDP never moves parameters).
        self._param_index = param_index
        self.process_group = process_group
        self._comm = comm
        self.step = 0
        self._descs = {}
        self._lock = threading.Lock()
        # Set by ddp.load_state_dict() and by load_state_dict() between two
        # steps: a model resumed without its hook state is warned about once.
        self._model_loaded = False
        self._state_loaded = False
        # Parameters whose .grad is set to None at the end of each synchronized
        # backward (optimizer_in_backward: the hook has stepped them).
        self._clear_grads_of = ()
        self._clear_queued = False
        # ids of the parameters the hook steps itself (zero, optimizer_overlap),
        # and the torch.optim step pre-hook that refuses a second step of them.
        self._stepped = frozenset()
        self._stepped_by = ""
        self._step_check = None
        self.label = "ddph"  # the torch.profiler ranges' name: "ddph family/name"
        # Steps submitted since the session opened (its span records' step)
        # and the clock marks that place those spans in a profiler's trace.
        self._session_steps = 0
        self._clock_marks = _profiler.StepMarks()

    def _submit(self, bucket):
        if self._model_loaded or self._state_loaded:
            self._check_resumed()
        if self._clear_grads_of and not self._clear_queued:
            self._clear_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._behind_ddp_finalize)
        buf = bucket.buffer()
        if not buf.is_contiguous():
            raise ValueError("ddph: the bucket buffer is not contiguous")
        params = bucket.parameters()
        index = bucket.index()
        key = _key(buf, params)
        desc = self._descs.get(index)
        if desc is None or desc.key != key:
            ids = [self._param_index.get(p.data_ptr(), -1) for p in params]
            desc = _BucketDesc(key, buf, bucket.gradients(), params, ids)
            self._descs[index] = desc
        b = desc.bucket
        is_last = bucket.is_last()
        with self._lock:
            b.index = _abi.checked_int(index, "bucket index", _abi.UINT64)
            b.step = _abi.checked_int(self.step, "step", _abi.UINT64)
            b.is_last = 1 if is_last else 0
            b.stream = torch.cuda.current_stream(buf.device).cuda_stream if buf.is_cuda else None
            session_step = self._session_steps
            if is_last:
                self.step += 1
                self._session_steps += 1
        fut = torch.futures.Future()

        def on_done(error):
            if error is None:
                fut.set_result(buf)
            else:
                fut.set_exception(error)

        # PyTorch 1.13's set_exception stores the exception as the value, which
        # DDP would try to use as a tensor; a then() that raises it makes the
        # future DDP waits on fail properly, so backward() raises DDPHError's text.
        if not torch.autograd._profiler_enabled():
            # The loader copies the descriptor; buf and the parameters are DDP's
            # and outlive the step. `desc` is kept anyway in case DDP rebuilds.
            self.session.submit(b, on_done, (buf, desc))
            return fut.then(_unwrap)
        # Under torch.profiler: one range per bucket, from its submission to
        # its completion on ddph's worker (the range ends with the future),
        # and a clock mark per step for its phases (profiler.export_chrome_trace).
        self._clock_marks.mark_if_profiling(session_step)
        with torch.autograd.profiler.record_function(
                "%s bucket %d" % (self.label, index),
                "step %d, %d bytes" % (self.step - is_last, buf.numel() * buf.element_size())
        ) as rf:
            self.session.submit(b, on_done, (buf, desc))
            return rf._call_end_callbacks_on_future(fut.then(_unwrap))

    # DDP queues its end-of-backward callback, which copies the reduced
    # buckets into .grad, after the hook has had its first bucket; the
    # engine runs callbacks queued by callbacks too, so this one runs after
    # DDP's and clears the gradients as PyTorch's optimizer-in-backward does.
    def _behind_ddp_finalize(self):
        torch.autograd.Variable._execution_engine.queue_callback(self._clear_grads)

    def _clear_grads(self):
        self._clear_queued = False
        for p in self._clear_grads_of:
            p.grad = None

    def _refuse_steps_of(self, module, params, stepped_by):
        """Refuses a torch.optim step of `params` (of `module`), which the
        hook steps itself (PyTorch 2); on 1.13, which has no global step
        hooks, warns at the next forward instead (docs/zero.md)."""
        params = list(params)
        self._stepped = frozenset(id(p) for p in params)
        self._stepped_by = stepped_by
        self._step_check = _compat.register_optimizer_step_pre_hook(self._check_optimizer_step)
        if self._step_check is None:
            self._warn_second_steps_of(module, params)

    def _warn_second_steps_of(self, module, params):
        """A second step cannot be refused before it happens without a global
        step hook, so it is noticed at the next forward and warned about,
        once. ddph writes the parameters it steps through their memory, which
        leaves their version counters alone; a torch.optim step updates them
        in place (p.add_), which bumps them. module.load_state_dict() bumps
        them too, and restarts the watch."""
        index = {id(p): i for i, p in enumerate(module.parameters())}
        watched = [(weakref.ref(p), index.get(id(p), -1)) for p in params]
        seen = {"versions": None, "warned": False}

        def versions():
            return [ref()._version if ref() is not None else -1 for ref, _ in watched]

        def check(_module, _inputs):
            if seen["warned"] or self.session._handle is None:
                return
            now = versions()
            before, seen["versions"] = seen["versions"], now
            if before is None or before == now:
                return
            seen["warned"] = True
            moved = [watched[i][1] for i, (a, b) in enumerate(zip(before, now)) if a != b]
            warnings.warn(
                "ddphooks.torch: %d parameter(s) of the DDP model (its parameters %s) changed in "
                "place since the last forward, and %s already steps them during the backward: "
                "was an optimizer's step() called on them too? Each would move twice. PyTorch "
                "%s has no global optimizer step hook to refuse it before it happens (PyTorch 2 "
                "refuses it)" % (len(moved), _ranges(moved), self._stepped_by, torch.__version__),
                RuntimeWarning)

        def restart(*_args):
            seen["versions"] = None

        module.register_forward_pre_hook(check)
        module._register_load_state_dict_pre_hook(restart)

    def _check_optimizer_step(self, optimizer, args, kwargs):
        # Only a parameter with a gradient would move: optimizer_in_backward
        # leaves none, and torch.optim skips those.
        twice = [i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])
                 if id(p) in self._stepped and p.grad is not None]
        if twice:
            raise errors.DDPHError(
                errors.Code.INVALID_ARGUMENT,
                "ddphooks.torch: %s.step() would step %d parameter(s) (its parameters %s) that "
                "%s already steps during the backward: each would move twice. Leave them out of "
                "that optimizer; nothing was stepped" %
                (type(optimizer).__name__, len(twice), _ranges(twice), self._stepped_by))

    def stats(self):
        return self.session.stats()

    def metrics(self, per_bucket=False):
        """The synchronized steps completed since the last call, one
        ddphooks.metrics.StepMetrics each (see Session.metrics); e.g. after
        optimizer.step(): ``for m in hook.metrics(): writer.write(m, loss=...)``."""
        return self.session.metrics(per_bucket)

    def spans(self):
        """The phases of its buckets since the last call (Session.spans());
        ddphooks.torch.profiler.export_chrome_trace puts them in a trace."""
        return self.session.spans()

    def state_dict(self):
        """{"step": int, "state": bytes} (waits for in-flight buckets)."""
        return {"step": self.step, "state": self.session.state_dict()}

    def load_state_dict(self, state):
        self.session.load_state_dict(state["state"])
        self.step = _abi.checked_int(state["step"], "state['step']", _abi.UINT64)
        self._state_loaded = True

    def _check_resumed(self):
        """At the first bucket after ddp.load_state_dict() or load_state_dict():
        warns if the model was restored and the hook, which keeps state, was
        not (its error feedback or optimizer state would start afresh, silently)."""
        model_only = self._model_loaded and not self._state_loaded
        self._model_loaded = self._state_loaded = False
        if not model_only:
            return
        # The saved state's record count (loader/session/state_blob.h: u32 at byte 12);
        # the session is fresh here, so the copy is small.
        blob = self.session.state_dict()
        if len(blob) >= 16 and int.from_bytes(blob[12:16], "little") > 0:
            warnings.warn(
                "ddphooks.torch: ddp.load_state_dict() restored the model, but this step runs "
                "without hook.load_state_dict(): the hook's state (PowerSGD's error feedback, "
                "optimizer state, the step) starts afresh. Save hook.state_dict() beside "
                "ddp.state_dict() and load both (docs/python.md, Checkpoints).",
                RuntimeWarning)

    @staticmethod
    def consolidate(state_dicts):
        """One state_dict() from those of every rank (any order), which
        load_state_dict() takes on a job of any size: the zero hooks' shards
        are joined (ddphooks.checkpoint.consolidate), as
        ZeroRedundancyOptimizer.consolidate_state_dict gathers its state."""
        steps = {int(s["step"]) for s in state_dicts}
        if len(steps) != 1:
            raise errors.DDPHError(errors.Code.INVALID_ARGUMENT,
                                   "ddphooks.torch: the ranks' states are of steps %s; "
                                   "consolidate the states of one step" % sorted(steps))
        return {"step": steps.pop(),
                "state": checkpoint.consolidate([s["state"] for s in state_dicts])}

    def _from_legacy_tensor(self, t):
        """Restores the uint8 tensor older versions saved under LEGACY_STATE_KEY:
        the step (8 bytes, little-endian), then the session's state."""
        blob = t.detach().cpu().contiguous().numpy().tobytes()
        if len(blob) < 8:
            raise errors.DDPHError(errors.Code.INVALID_ARGUMENT,
                                   "%s holds %d bytes, fewer than its 8-byte step" %
                                   (LEGACY_STATE_KEY, len(blob)))
        self.session.load_state_dict(blob[8:])
        self.step = int.from_bytes(blob[:8], "little")

    def close(self):
        if self._step_check is not None:
            self._step_check.remove()
            self._step_check = None
        self.session.close()


def _ranges(indices):
    """"0-3, 7" for [0, 1, 2, 3, 7]."""
    out, start = [], None
    for i, n in enumerate(indices):
        if start is None:
            start = n
        if i + 1 == len(indices) or indices[i + 1] != n + 1:
            out.append(str(start) if start == n else "%d-%d" % (start, n))
            start = None
    return ", ".join(out)


def hook_label(config):
    """"ddph family/name" of the config's outer hook (with "+ rules" when it
    has rules), for profiler ranges; "ddph" when it cannot be read."""
    doc = _config_doc(config)
    hook = doc.get("hook") if isinstance(doc, dict) else None
    if not isinstance(hook, dict):
        return "ddph"
    label = "ddph %s/%s" % (hook.get("family"), hook.get("name"))
    return label + " + rules" if doc.get("rules") else label


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
        store = dist.PrefixStore("ddphooks/", dist.distributed_c10d._get_default_store())
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
