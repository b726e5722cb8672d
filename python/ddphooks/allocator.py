"""Device memory the host lends to ddphooks (ABI 1.3's ddph_device_allocator_t).

A session given a DeviceAllocator takes the scratch of its GPU buckets from
it instead of from ddphooks' own pool, so one framework's caching allocator
sees, and can reuse, all of the job's GPU memory. CPU buckets never call it.
"""
import logging

from . import _abi

_log = logging.getLogger("ddphooks")


class DeviceAllocator:
    """Wraps two Python callables as a ddph_device_allocator_t.

    alloc(nbytes, device_id, stream) -> int: the address of `nbytes` of
        memory on CUDA device `device_id`, usable by work enqueued on
        `stream` (a cudaStream_t as an int; 0 is the legacy default stream).
        0, or an exception, means out of memory: the hook then fails with
        DDPH_OUT_OF_MEMORY.
    free(ptr, device_id, stream): takes back a block from alloc once the
        work enqueued on `stream` so far has finished (stream-ordered), with
        the device and stream of its alloc. Exceptions are logged, not raised.

    Both are called from ddphooks' worker threads (ctypes takes the GIL), so
    they must be thread-safe. Keep the object alive while any session that
    uses it is open.
    """

    def __init__(self, alloc, free):
        self._alloc, self._free = alloc, free

        def c_alloc(_ctx, nbytes, device, stream):
            try:
                ptr = self._alloc(int(nbytes), device.device_id, stream or 0)
                return _abi.checked_int(ptr or 0, "alloc()'s address", _abi.POINTER_INT) or None
            except Exception:  # an exception must not unwind into C
                _log.exception("ddphooks: the device allocator's alloc(%d) failed", nbytes)
                return None

        def c_free(_ctx, ptr, device, stream):
            try:
                self._free(ptr, device.device_id, stream or 0)
            except Exception:
                _log.exception("ddphooks: the device allocator's free failed")

        # The ctypes callbacks must live as long as the table.
        self._callbacks = (_abi.DeviceAllocFn(c_alloc), _abi.DeviceFreeFn(c_free))
        self.table = _abi.new(_abi.DeviceAllocator, alloc=self._callbacks[0],
                              free=self._callbacks[1])
