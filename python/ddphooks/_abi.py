"""ctypes mirror of abi/include/ddph/ddph.h (ABI 1.7) and of DLPack's DLTensor.

Only layout lives here: the structs, the callback types and the prototypes of
libddph.so's host API. Every struct starts with ``struct_size``; the helpers
``new_*`` fill it in so callers never forget.
"""
import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int32,
                    c_int64, c_size_t, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

# --- DLPack (dlpack/dlpack.h, v0.6+) ---------------------------------------

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DLDeleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DLDeleter),
]

# --- ddph.h ---------------------------------------------------------------

DDPH_SUM, DDPH_AVG, DDPH_MAX, DDPH_MIN = 0, 1, 2, 3

# Callbacks. Error-returning ones return ddph_error_t* as c_void_p (None = NULL).
WriteFn = CFUNCTYPE(None, c_void_p, c_void_p, c_size_t)
DoneFn = CFUNCTYPE(None, c_void_p, c_void_p)
StoreSetFn = CFUNCTYPE(c_void_p, c_void_p, c_char_p, c_void_p, c_size_t)
StoreGetFn = CFUNCTYPE(c_void_p, c_void_p, c_char_p, c_int64, WriteFn, c_void_p)
StoreDelFn = CFUNCTYPE(c_void_p, c_void_p, c_char_p)

CommIntFn = CFUNCTYPE(c_int, c_void_p)
CommReduceFn = CFUNCTYPE(c_void_p, c_void_p, POINTER(DLTensor), POINTER(DLTensor), c_int, c_void_p)
CommGatherFn = CFUNCTYPE(c_void_p, c_void_p, POINTER(DLTensor), POINTER(DLTensor), c_void_p)
CommBroadcastFn = CFUNCTYPE(c_void_p, c_void_p, POINTER(DLTensor), c_int, c_void_p)
CommBarrierFn = CFUNCTYPE(c_void_p, c_void_p)
CommP2PFn = CFUNCTYPE(c_void_p, c_void_p, POINTER(DLTensor), c_int, c_void_p)
CommSplitFn = CFUNCTYPE(c_void_p, c_void_p, c_int, c_int, c_void_p)
CommBytesFn = CFUNCTYPE(c_uint64, c_void_p)
CommDestroyFn = CFUNCTYPE(None, c_void_p)
CommAlltoallvFn = CFUNCTYPE(c_void_p, c_void_p, POINTER(DLTensor), POINTER(c_int64),
                            POINTER(DLTensor), POINTER(c_int64), c_void_p)


class Store(Structure):
    _fields_ = [("struct_size", c_size_t), ("ctx", c_void_p), ("set", StoreSetFn),
                ("get", StoreGetFn),
                # ABI 1.4
                ("del", StoreDelFn)]


class Comm(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ctx", c_void_p),
        ("rank", CommIntFn),
        ("size", CommIntFn),
        ("allreduce", CommReduceFn),
        ("allgather", CommGatherFn),
        ("reduce_scatter", CommReduceFn),
        ("broadcast", CommBroadcastFn),
        ("barrier", CommBarrierFn),
        ("send", CommP2PFn),
        ("recv", CommP2PFn),
        ("split", CommSplitFn),
        ("bytes_sent", CommBytesFn),
        ("destroy", CommDestroyFn),
        # ABI 1.1
        ("alltoallv", CommAlltoallvFn),
    ]


class Param(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("offset", c_int64),
        ("ndim", c_int32),
        ("shape", POINTER(c_int64)),
        ("data", DLTensor),
    ]


class Bucket(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("index", c_uint64),
        ("step", c_uint64),
        ("is_last", c_int32),
        ("buffer", DLTensor),
        ("num_params", c_size_t),
        ("params", POINTER(Param)),
        ("stream", c_void_p),
        # ABI 1.2: the host's stable id of each parameter, or NULL.
        ("param_ids", POINTER(c_int64)),
    ]


class Stats(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("steps", c_uint64),
        ("buckets", c_uint64),
        ("bytes_in", c_uint64),
        ("bytes_out", c_uint64),
        ("wire_bytes", c_uint64),
    ]


# ABI 1.3: device memory the host lends for the scratch of GPU buckets.
DeviceAllocFn = CFUNCTYPE(c_void_p, c_void_p, c_size_t, DLDevice, c_void_p)
DeviceFreeFn = CFUNCTYPE(None, c_void_p, c_void_p, DLDevice, c_void_p)


class DeviceAllocator(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ctx", c_void_p),
        ("alloc", DeviceAllocFn),
        ("free", DeviceFreeFn),
    ]


class SessionOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("yaml_path", c_char_p),
        ("yaml_text", c_char_p),
        ("rank", c_int32),
        ("world_size", c_int32),
        ("rendezvous", c_char_p),
        ("store", POINTER(Store)),
        ("comm", POINTER(Comm)),
        # ABI 1.3
        ("device_allocator", POINTER(DeviceAllocator)),
        # ABI 1.4
        ("job", c_char_p),
    ]


# ABI 1.5: the figures of one completed bucket (ddph_session_take_metrics).
class BucketMetrics(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("step", c_uint64),
        ("bucket", c_uint32),
        ("is_last", c_int32),
        ("bytes_in", c_uint64),
        ("bytes_out", c_uint64),
        ("wire_bytes", c_uint64),
        ("queue_seconds", c_double),
        ("hook_seconds", c_double),
        ("ok", c_int32),
        # ABI 1.7: time.monotonic_ns() when the worker started it
        ("start_ns", c_uint64),
        # ABI 1.10: an auto hook's candidate (its index in the candidates
        # option; -1 for a fixed hook) and why (CHOICE_REASONS)
        ("candidate", c_int32),
        ("choice_reason", c_int32),
    ]


# ddph_choice_reason_t, by value.
CHOICE_REASONS = ("fixed", "warmup", "explore", "fastest", "critical", "model")


# ABI 1.7: one phase of one bucket (ddph_session_take_spans); times on
# CLOCK_MONOTONIC, Python's time.monotonic_ns().
class Span(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("step", c_uint64),
        ("bucket", c_uint32),
        ("phase", c_int32),
        ("start_ns", c_uint64),
        ("end_ns", c_uint64),
    ]


# ddph_phase_t, by value.
PHASES = ("compress", "collective", "decompress", "optimizer_step")


# ABI 1.5: ddph_log_fn(user, level, family, rank, message); level is
# DDPH_LOG_ERROR (0) .. DDPH_LOG_DEBUG (3).
DDPH_LOG_ERROR, DDPH_LOG_WARN, DDPH_LOG_INFO, DDPH_LOG_DEBUG = 0, 1, 2, 3
LogFn = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_int32, c_char_p)

ErrorNewFn = CFUNCTYPE(c_void_p, c_int, c_char_p)


class Host(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("abi_major", c_uint32),
        ("abi_minor", c_uint32),
        ("error_new", ErrorNewFn),
        ("error_free", c_void_p),
        ("error_code", c_void_p),
        ("error_message", c_void_p),
        ("log", c_void_p),
        # ABI 1.7
        ("span", c_void_p),
    ]


# --- checked conversions --------------------------------------------------
# ctypes wraps an integer that does not fit its C type without a word (2**31
# in an int32_t is -2**31) and a char* ends at the first NUL. Every integer
# and string Python hands libddph.so goes through these instead.

INT32 = ("int32_t", -2 ** 31, 2 ** 31 - 1)
INT64 = ("int64_t", -2 ** 63, 2 ** 63 - 1)
UINT64 = ("uint64_t", 0, 2 ** 64 - 1)
SIZE = ("size_t", 0, 2 ** (8 * ctypes.sizeof(c_size_t)) - 1)
POINTER_INT = ("a pointer", 0, 2 ** (8 * ctypes.sizeof(c_void_p)) - 1)
C_INT = ("int", -2 ** (8 * ctypes.sizeof(c_int) - 1), 2 ** (8 * ctypes.sizeof(c_int) - 1) - 1)


def checked_int(value, name, ctype, low=None, high=None):
    """`value` as a Python int within the C type `ctype` (INT32, UINT64, ...)
    and within [low, high] where given; else TypeError (not an integer, or a
    bool) or OverflowError/ValueError naming `name` and the range."""
    type_name, lo, hi = ctype
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s must be an integer, not %s" % (name, type(value).__name__))
    v = value.__index__()
    if not lo <= v <= hi:
        raise OverflowError("%s = %d does not fit in %s (%d to %d)" % (name, v, type_name, lo, hi))
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError("%s = %d is out of range (%s to %s)"
                         % (name, v, lo if low is None else low, hi if high is None else high))
    return v


def checked_str(value, name, allow_none=True):
    """`value` (a str, or bytes) as UTF-8 bytes for a char*; None stays None
    where allowed. A NUL would end the C string early: ValueError."""
    if value is None:
        if allow_none:
            return None
        raise TypeError("%s must be a string, not None" % name)
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, bytes):
        data = value
    else:
        raise TypeError("%s must be a string, not %s" % (name, type(value).__name__))
    if b"\0" in data:
        raise ValueError("%s contains a NUL character at offset %d; C would cut the "
                         "string there" % (name, data.index(b"\0")))
    return data


def new(struct_type, **fields):
    """A zeroed struct with struct_size set, then the given fields."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def declare(lib):
    """Sets argtypes/restype of libddph.so's host API on the CDLL ``lib``."""
    E = c_void_p  # ddph_error_t *
    protos = {
        "ddph_session_open": (E, [POINTER(SessionOptions), POINTER(c_void_p)]),
        "ddph_session_submit": (E, [c_void_p, POINTER(Bucket), DoneFn, c_void_p]),
        "ddph_session_flush": (E, [c_void_p]),
        "ddph_session_stats": (E, [c_void_p, POINTER(Stats)]),
        "ddph_session_save_state": (E, [c_void_p, WriteFn, c_void_p]),
        "ddph_session_load_state": (E, [c_void_p, c_void_p, c_size_t]),
        "ddph_session_comm": (POINTER(Comm), [c_void_p]),
        "ddph_session_close": (None, [c_void_p]),
        "ddph_error_code": (c_int, [c_void_p]),
        "ddph_error_message": (c_char_p, [c_void_p]),
        "ddph_error_free": (None, [c_void_p]),
        "ddph_host": (POINTER(Host), []),
        "ddph_version": (c_char_p, []),
        # ABI 1.5
        "ddph_session_take_metrics": (E, [c_void_p, POINTER(BucketMetrics), POINTER(c_int32)]),
        "ddph_set_log_sink": (None, [LogFn, c_void_p, c_int]),
        # ABI 1.7
        "ddph_session_take_spans": (E, [c_void_p, POINTER(Span), POINTER(c_int32)]),
    }
    for name, (restype, argtypes) in protos.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib

