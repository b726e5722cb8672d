"""A DDP GradBucket as the ABI describes it (ddph_bucket_t): its flat
buffer, and each parameter with its offset, shape and id."""
import ctypes

from .. import _abi, _tensors


class BucketDesc:
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


def bucket_key(buf, params):
    """What must stay the same for a BucketDesc to describe the bucket again."""
    return (buf.data_ptr(), buf.numel(), buf.dtype, tuple(p.data_ptr() for p in params))
