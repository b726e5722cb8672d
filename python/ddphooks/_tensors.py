"""Buffers in and out of DLTensor, without copies.

In: NumPy arrays (and anything with ``__array_interface__``) through the
array interface; everything else with ``__dlpack__`` (PyTorch, CuPy, JAX)
through its DLPack capsule. Out (for a host communicator written in
Python): a torch.Tensor over a DLTensor's memory, through a DLPack capsule
that owns nothing.
"""
import ctypes
import sys

from . import _abi

_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR_NAME = ctypes.c_char_p(b"dltensor")  # must outlive every capsule made with it

# Array-interface type characters -> DLPack type codes.
_KINDS = {"f": _abi.kDLFloat, "i": _abi.kDLInt, "u": _abi.kDLUInt, "b": _abi.kDLUInt}


class View:
    """A DLTensor describing a buffer as 1-D and contiguous, plus whatever
    must stay alive while the library uses it (the capsule, the shape)."""

    __slots__ = ("tensor", "numel", "keep")

    def __init__(self, tensor, numel, keep):
        self.tensor = tensor
        self.numel = numel
        self.keep = keep


def _flat(data, device, dtype, numel, byte_offset, keep):
    shape = (ctypes.c_int64 * 1)(numel)
    t = _abi.DLTensor()
    t.data = data
    t.device = device
    t.ndim = 1
    t.dtype = dtype
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = None
    t.byte_offset = byte_offset
    return View(t, numel, keep + (shape,))


def _compact(shape, strides):
    """Whether element strides describe a C-contiguous layout."""
    expected = 1
    for size, stride in reversed(list(zip(shape, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _from_array_interface(obj, ai):
    typestr = ai["typestr"]
    byteorder, kind, itemsize = typestr[0], typestr[1], int(typestr[2:])
    native = "<" if sys.byteorder == "little" else ">"
    if byteorder not in ("|", "=", native):
        raise ValueError("buffer dtype %s is not in this machine's byte order" % typestr)
    if kind not in _KINDS:
        raise TypeError("buffer dtype %s is not a number type ddph can reduce" % typestr)
    ptr, readonly = ai["data"]
    if readonly:
        raise ValueError("buffer is read-only; ddph writes the result in place")
    shape = tuple(ai["shape"])
    numel = 1
    for s in shape:
        numel *= s
    strides = ai.get("strides")
    if strides is not None and not _compact(shape, [s // itemsize for s in strides]):
        raise ValueError("buffer is not contiguous; ddph needs one dense block (use "
                         "numpy.ascontiguousarray and copy back)")
    dtype = _abi.DLDataType(_KINDS[kind], itemsize * 8, 1)
    return _flat(ptr, _abi.DLDevice(_abi.kDLCPU, 0), dtype, numel, 0, (obj,))


def _from_dlpack(obj):
    capsule = obj.__dlpack__()
    ptr = _pyapi.PyCapsule_GetPointer(capsule, b"dltensor")
    managed = _abi.DLManagedTensor.from_address(ptr)
    src = managed.dl_tensor
    shape = [src.shape[i] for i in range(src.ndim)]
    numel = 1
    for s in shape:
        numel *= s
    if src.strides and not _compact(shape, [src.strides[i] for i in range(src.ndim)]):
        raise ValueError("buffer is not contiguous; ddph needs one dense block "
                         "(call .contiguous() and copy back)")
    # The capsule stays unconsumed: its own destructor frees the DLManagedTensor
    # once the View (which keeps it) is dropped, after the bucket completes.
    return _flat(src.data, _abi.DLDevice(src.device.device_type, src.device.device_id),
                 _abi.DLDataType(src.dtype.code, src.dtype.bits, src.dtype.lanes), numel,
                 src.byte_offset, (obj, capsule))


def view_of(obj):
    """A flat View of obj: a NumPy array, an object with __array_interface__,
    or any object with __dlpack__ (torch.Tensor, CuPy, JAX)."""
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return _from_array_interface(obj, ai)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    raise TypeError("%s is neither a NumPy array nor a DLPack tensor (no __array_interface__ "
                    "or __dlpack__)" % type(obj).__name__)


def describe_params(bucket, entries, ids, keep):
    """Fills bucket.params from entries, one (offset, shape, data) per
    parameter: its gradient's first element in the buffer, its shape, and a
    DLTensor of the parameter itself or None; and bucket.param_ids from ids
    unless it is None. The arrays made here go into `keep`, which must live
    as long as the bucket (as must whatever `data` points at)."""
    n = len(entries)
    if n == 0:
        return
    array = (_abi.Param * n)()
    for d, (offset, shape, data) in zip(array, entries):
        dims = (ctypes.c_int64 * max(len(shape), 1))(
            *[_abi.checked_int(d, "a parameter's shape", _abi.INT64) for d in shape])
        d.struct_size = ctypes.sizeof(_abi.Param)
        d.offset = offset
        d.ndim = len(shape)
        d.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
        if data is not None:
            d.data = data
        keep.append(dims)
    bucket.num_params = n
    bucket.params = ctypes.cast(array, ctypes.POINTER(_abi.Param))
    keep.append(array)
    if ids is not None:
        id_array = (ctypes.c_int64 * n)(
            *[_abi.checked_int(x, "param_ids[%d]" % i, _abi.INT64) for i, x in enumerate(ids)])
        bucket.param_ids = ctypes.cast(id_array, ctypes.POINTER(ctypes.c_int64))
        keep.append(id_array)


# --- torch tensors, straight from a data pointer (the PyTorch adapter) ------

_TORCH_DTYPES = None


def _torch_dtypes():
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        import torch
        _TORCH_DTYPES = {
            torch.float32: (_abi.kDLFloat, 32), torch.float64: (_abi.kDLFloat, 64),
            torch.float16: (_abi.kDLFloat, 16), torch.bfloat16: (_abi.kDLBfloat, 16),
            torch.int8: (_abi.kDLInt, 8), torch.int16: (_abi.kDLInt, 16),
            torch.int32: (_abi.kDLInt, 32), torch.int64: (_abi.kDLInt, 64),
            torch.uint8: (_abi.kDLUInt, 8),
        }
    return _TORCH_DTYPES


def fill_from_torch(t, tensor, shape_array):
    """Fills DLTensor t to describe torch tensor `tensor` (any shape,
    contiguous) with the given shape array (ctypes c_int64 array, kept alive
    by the caller)."""
    code, bits = _torch_dtypes()[tensor.dtype]
    t.data = tensor.data_ptr()
    dev = tensor.device
    if dev.type == "cuda":
        t.device = _abi.DLDevice(_abi.kDLCUDA, dev.index or 0)
    elif dev.type == "cpu":
        t.device = _abi.DLDevice(_abi.kDLCPU, 0)
    else:
        raise TypeError("ddph: tensors on %s are not supported" % dev)
    t.ndim = len(shape_array)
    t.dtype = _abi.DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    t.strides = None
    t.byte_offset = 0


# DLManagedTensors handed to PyTorch, by address, until PyTorch frees them.
_live = {}


def _release(managed_ptr):
    _live.pop(ctypes.cast(managed_ptr, ctypes.c_void_p).value, None)


_RELEASE = _abi.DLDeleter(_release)


def torch_view(t_ptr):
    """A 1-D torch.Tensor over the memory of DLTensor* t_ptr, owning nothing
    of that memory: valid while the library keeps it, i.e. for the duration
    of the callback that received it."""
    from torch.utils.dlpack import from_dlpack
    src = t_ptr.contents
    numel = 1
    for i in range(src.ndim):
        numel *= src.shape[i]
    managed = _abi.DLManagedTensor()
    shape = (ctypes.c_int64 * 1)(numel)
    managed.dl_tensor.data = src.data
    managed.dl_tensor.device = _abi.DLDevice(src.device.device_type, src.device.device_id)
    managed.dl_tensor.ndim = 1
    managed.dl_tensor.dtype = _abi.DLDataType(src.dtype.code, src.dtype.bits, src.dtype.lanes)
    managed.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    managed.dl_tensor.strides = None
    managed.dl_tensor.byte_offset = src.byte_offset
    managed.manager_ctx = None
    managed.deleter = _RELEASE  # PyTorch calls it when the tensor dies
    addr = ctypes.addressof(managed)
    _live[addr] = (managed, shape)
    return from_dlpack(_pyapi.PyCapsule_New(addr, _DLTENSOR_NAME, None))
