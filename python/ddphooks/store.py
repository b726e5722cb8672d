"""A host key-value store lent to libddph.so as a ddph_store_t.

Anything with ``set(key, value: bytes)`` and a blocking ``get(key) -> bytes``
serves; PyTorch's c10d stores (TCPStore, FileStore, PrefixStore) do. When the
object also has ``wait(keys, timedelta)`` (c10d does), the library's per-call
timeout is honoured through it; a timeout becomes DDPH_TIMEOUT. When it has
``delete_key(key)`` (c10d does), a session removes its keys once every rank
has read them, so the same job can open again on the same store.
"""
import ctypes
import datetime

from . import _abi, _library, errors


class HostStore:
    """Wraps `store` in a ddph_store_t. Keep this object alive as long as any
    session opened with it (Session does that for you)."""

    def __init__(self, store):
        self.store = store
        self._set = _abi.StoreSetFn(self._on_set)
        self._get = _abi.StoreGetFn(self._on_get)
        self._del = _abi.StoreDelFn(self._on_del)
        self.table = _abi.new(_abi.Store, ctx=None, set=self._set, get=self._get)
        setattr(self.table, "del", self._del)  # a Python keyword: no keyword argument

    def _fail(self, code, what, e):
        return errors.make(_library.load(), code, "host store %s: %s: %s" %
                           (what, type(e).__name__, e))

    def _on_set(self, ctx, key, value, n):
        try:
            self.store.set(key.decode(), ctypes.string_at(value, n) if n else b"")
            return None
        except BaseException as e:
            return self._fail(errors.Code.COMM_FAILURE, "set(%r)" % key.decode(), e)

    def _on_get(self, ctx, key, timeout_ms, write, sink):
        k = key.decode()
        try:
            if hasattr(self.store, "wait"):
                self.store.wait([k], datetime.timedelta(milliseconds=max(int(timeout_ms), 1)))
            value = bytes(self.store.get(k))
        except BaseException as e:
            timed_out = "timeout" in str(e).lower() or isinstance(e, TimeoutError)
            code = errors.Code.TIMEOUT if timed_out else errors.Code.COMM_FAILURE
            return self._fail(code, "get(%r) within %d ms" % (k, timeout_ms), e)
        buf = ctypes.create_string_buffer(value, len(value))
        write(sink, ctypes.cast(buf, ctypes.c_void_p), len(value))
        return None

    def _on_del(self, ctx, key):
        k = key.decode()
        try:
            if hasattr(self.store, "delete_key"):
                self.store.delete_key(k)
            return None
        except BaseException as e:
            return self._fail(errors.Code.COMM_FAILURE, "delete_key(%r)" % k, e)
