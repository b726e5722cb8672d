"""GradientReducer: a JAX gradient pytree through a ddph session.

The leaves are laid into buckets (flat host buffers of one dtype, up to
bucket_cap_mb each), every leaf at a 64-byte boundary, and each bucket is
reduced in place by the session's hook. The results go back to JAX without
a copy: jax.dlpack.from_dlpack adopts host memory aligned to 64 bytes. The
one copy is into the bucket, since a JAX array is immutable and the leaves
are separate buffers; a fresh bucket each step keeps the arrays of earlier
steps intact.
"""
import hashlib

import jax
import numpy as np

from .. import _abi, errors
from .._config import families
from ..session import Session

_ALIGN_BYTES = 64  # what jax.dlpack.from_dlpack adopts on the host without copying
# The dtypes a bucket can hold through NumPy (bfloat16 has no NumPy dtype of its own).
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))
# Families whose hooks step the parameters themselves: step(), not reduce().
_STEPPING_FAMILIES = ("zero", "optimizer_overlap")


def _refuse(message):
    raise errors.DDPHError(errors.Code.INVALID_ARGUMENT, "ddphooks.jax: " + message)


class _Bucket:
    """Leaves of one dtype: their indices in the flattened tree, their
    element offsets in the bucket, and the bucket's length."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.leaves, self.offsets, self.shapes = [], [], []
        self.numel = 0

    def add(self, index, shape, size):
        step = _ALIGN_BYTES // self.dtype.itemsize
        at = -(-self.numel // step) * step
        self.leaves.append(index)
        self.offsets.append(at)
        self.shapes.append(shape)
        self.numel = at + size


def _aligned_zeros(numel, dtype):
    """numel zeros of dtype whose first element is 64-byte aligned."""
    raw = np.zeros(numel * dtype.itemsize + _ALIGN_BYTES, dtype=np.uint8)
    skip = (-raw.ctypes.data) % _ALIGN_BYTES
    return raw[skip:skip + numel * dtype.itemsize].view(dtype)


class GradientReducer:
    """Reduces JAX gradient pytrees across ranks through a ddph session.

    config: a ddph YAML path, text or dict (docs/config.md). rank,
    world_size, rendezvous, job: as ddphooks.Session (by default from the
    YAML, then DDPH_RANK/RANK and DDPH_WORLD_SIZE/WORLD_SIZE; rendezvous
    "env://" reads MASTER_ADDR and MASTER_PORT). bucket_cap_mb: the most
    bytes per bucket, as DDP's. Opening is collective.
    """

    def __init__(self, config, *, rank=-1, world_size=-1, rendezvous=None, job=None,
                 bucket_cap_mb=25.0):
        if (isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float))
                or not 0 < bucket_cap_mb < float("inf")):
            _refuse("bucket_cap_mb is %r; it must be a positive number" % (bucket_cap_mb,))
        self._cap_bytes = int(bucket_cap_mb * (1 << 20))
        self.session = Session(config, rank=rank, world_size=world_size, rendezvous=rendezvous,
                               job=job)
        self._stepping = families(config) & set(_STEPPING_FAMILIES)
        self._plans = {}
        self._steps = 0  # reduce() and step() calls so far; every bucket carries it

    # -- the layout ---------------------------------------------------------

    def _plan(self, paths, leaves, treedef):
        metas = []
        for path, leaf in zip(paths, leaves):
            where = jax.tree_util.keystr(path) or "the root"
            if not isinstance(leaf, jax.Array):
                _refuse("the leaf at %s is a %s, not a JAX array" % (where, type(leaf).__name__))
            dtype = np.dtype(leaf.dtype)
            if dtype not in _DTYPES:
                _refuse("the leaf at %s is %s; the hooks reduce float32, float64 or float16 "
                        "(cast it, e.g. with jax.tree.map)" % (where, dtype.name))
            devices = leaf.devices()
            if len(devices) != 1 or next(iter(devices)).platform != "cpu":
                _refuse("the leaf at %s lives on %s; ddphooks.jax reduces arrays on one CPU "
                        "device per process" % (where, ", ".join(sorted(map(str, devices)))))
            metas.append((tuple(int(d) for d in leaf.shape), dtype))
        key = (treedef, tuple(metas))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        # Every rank must reduce the same pytree: say so before any bucket runs.
        digest = hashlib.sha256(repr(key).encode()).digest()
        self.session.agree("the gradient pytree (its structure, shapes and dtypes; %d leaves)"
                           % len(leaves), digest)
        buckets = []
        for i, (shape, dtype) in enumerate(metas):
            size = int(np.prod(shape, dtype=np.int64))
            last = buckets[-1] if buckets else None
            if (last is None or last.dtype != dtype
                    or (last.numel + size) * dtype.itemsize > self._cap_bytes and last.leaves):
                last = _Bucket(dtype)
                buckets.append(last)
            last.add(i, shape, size)
        self._plans[key] = buckets
        return buckets

    # -- reducing -----------------------------------------------------------

    def _run(self, grads, params):
        flat, treedef = jax.tree_util.tree_flatten_with_path(grads)
        paths = [p for p, _ in flat]
        leaves = [leaf for _, leaf in flat]
        buckets = self._plan(paths, leaves, treedef)
        param_leaves = None
        if params is not None:
            param_leaves, param_def = jax.tree_util.tree_flatten(params)
            if param_def != treedef:
                _refuse("params and grads are pytrees of different structures")
        out_grads = [None] * len(leaves)
        out_params = [None] * len(leaves)
        for b, bucket in enumerate(buckets):
            buf = _aligned_zeros(bucket.numel, bucket.dtype)
            for i, at in zip(bucket.leaves, bucket.offsets):
                buf[at:at + leaves[i].size] = np.asarray(leaves[i]).reshape(-1)  # the one copy
            described = bucket.shapes
            if param_leaves is not None:  # the hook steps these copies in place
                described = [_aligned_copy(np.asarray(param_leaves[i], dtype=bucket.dtype))
                             for i in bucket.leaves]
            self.session.run(buf, index=b, is_last=b == len(buckets) - 1, step=self._steps,
                             params=described, param_ids=bucket.leaves,
                             param_offsets=bucket.offsets)
            for k, (i, at) in enumerate(zip(bucket.leaves, bucket.offsets)):
                view = buf[at:at + leaves[i].size].reshape(bucket.shapes[k])
                out_grads[i] = jax.dlpack.from_dlpack(view)
                if param_leaves is not None:
                    out_params[i] = jax.dlpack.from_dlpack(described[k])
        self._steps += 1
        grads_out = jax.tree_util.tree_unflatten(treedef, out_grads)
        if param_leaves is None:
            return grads_out
        return jax.tree_util.tree_unflatten(treedef, out_params), grads_out

    def reduce(self, grads):
        """The mean of `grads` (a pytree of JAX arrays on the CPU) over all
        ranks, as the config's hook computes it; a new pytree of the same
        structure. Every rank must call it with the same pytree structure,
        shapes and dtypes, in the same order."""
        if self._stepping:
            _refuse("the hook family %s steps the parameters itself: call step(params, grads)"
                    % ", ".join(sorted(self._stepping)))
        return self._run(grads, None)

    def step(self, params, grads):
        """For hooks that step the optimizer themselves (zero,
        optimizer_overlap): reduces `grads` and returns the stepped params
        (a new pytree; the optimizer state stays in the hook, checkpointed
        by state_dict())."""
        if not self._stepping:
            _refuse("the config's hook does not step parameters: call reduce(grads) and apply "
                    "the update with your optimizer (optax)")
        return self._run(grads, params)[0]

    # -- state ----------------------------------------------------------------

    def state_dict(self):
        """{"step": int, "state": bytes}: the hooks' state (error feedback,
        PowerSGD's, the zero hooks' optimizer shard); save it beside the
        parameters (each rank its own)."""
        return {"step": self._steps, "state": self.session.state_dict()}

    def load_state_dict(self, state):
        self.session.load_state_dict(state["state"])
        self._steps = _abi.checked_int(state["step"], "state['step']", _abi.UINT64)

    def stats(self):
        return self.session.stats()

    def metrics(self, per_bucket=False):
        return self.session.metrics(per_bucket)

    def close(self):
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _aligned_copy(array):
    out = _aligned_zeros(array.size, array.dtype).reshape(array.shape)
    out[...] = array
    return out
