"""One ctypes done-callback for every submitted bucket.

libddph.so calls done(user, error) exactly once per accepted bucket, from any
thread, possibly before submit returns. `user` is a key into a table of
pending entries; the entry keeps the bucket's memory and descriptors alive
until then and receives the outcome (None or a DDPHError).
"""
import itertools
import threading

from . import _abi, _library, errors

_lock = threading.Lock()
_pending = {}
_keys = itertools.count(1)


def register(on_done, keep):
    """A fresh key for submit's `user`; on_done(error_or_None) runs at completion."""
    key = next(_keys)
    with _lock:
        _pending[key] = (on_done, keep)
    return key


def cancel(key):
    """Forgets a key whose submit was refused (done will never come)."""
    with _lock:
        _pending.pop(key, None)


def _done(user, err):
    try:
        error = errors.take(_library.load(), err)
        with _lock:
            entry = _pending.pop(user, None)
        if entry is not None:
            entry[0](error)
    except BaseException as e:  # never let an exception unwind into C
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__)


DONE = _abi.DoneFn(_done)


class Waiter:
    """on_done for a caller that blocks until its bucket completes."""

    __slots__ = ("event", "error")

    def __init__(self):
        self.event = threading.Event()
        self.error = None

    def __call__(self, error):
        self.error = error
        self.event.set()

    def wait(self):
        self.event.wait()
        if self.error is not None:
            raise self.error
