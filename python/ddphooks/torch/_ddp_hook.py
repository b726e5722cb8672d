"""The object behind the DDP comm hook: each GradBucket goes to the session
zero-copy, and the returned torch.futures.Future completes from the ddph
completion callback; the step count and the hooks' state are its
checkpoint."""
import threading
import warnings

import torch

from .. import _abi, checkpoint, errors
from ._ddp_bucket import BucketDesc, bucket_key
from ._second_steps import SecondStepGuard
from ._session_handle import SessionHandle

# Where versions before the checkpoint change put the hook state inside
# ddp.state_dict(); such checkpoints still load (the key is taken out).
LEGACY_STATE_KEY = "_ddph_hook_state"


def _unwrap(fut):
    return fut.value()


class DDPHook(SessionHandle):
    """What register() returns: the session behind the DDP hook.

    ``step``: synchronized steps so far (buckets with is_last; no_sync()
    steps do not count, as in PyTorch's hooks). ``state_dict()`` /
    ``load_state_dict()`` checkpoint the step and the hooks' state: save it
    beside ``ddp.state_dict()``, which stays the model's alone (so it loads
    into a plain model), e.g. ``{"model": ddp.state_dict(), "ddph":
    hook.state_dict()}``.
    """

    def __init__(self, session, process_group, comm, param_index):
        super().__init__(session)
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
        # The parameters the hook steps itself (zero, optimizer_overlap).
        self._second_steps = SecondStepGuard(session)

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
        key = bucket_key(buf, params)
        desc = self._descs.get(index)
        if desc is None or desc.key != key:
            ids = [self._param_index.get(p.data_ptr(), -1) for p in params]
            desc = BucketDesc(key, buf, bucket.gradients(), params, ids)
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
        hook steps itself (_second_steps.py)."""
        self._second_steps.refuse_steps_of(module, params, stepped_by)

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
        self._second_steps.remove()
        self.session.close()
