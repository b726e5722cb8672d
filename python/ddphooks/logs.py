"""The library's log lines in Python's ``logging``.

When libddph.so is loaded, every line of the loader and its plugins goes to
the logger ``"ddphooks"`` (instead of stderr) as a record whose message is
``"<family> [rank <r>]: <text>"`` and whose extra attributes are ``family``
(``"loader"``, a plugin family such as ``"powersgd"``, or None) and ``rank``
(the rank of the session whose thread logged, or -1).

Which lines the library hands over is decided in the library, by a level:
DDPH_LOG_LEVEL (error, warn, info or debug) when set, else the logger's
effective level at the time (DEBUG -> debug, INFO -> info, WARNING -> warn,
higher -> error). It is read when the library is loaded and again at each
Session open; call ``install()`` after changing the logger's level to apply
it at once. ``uninstall()`` sends the lines to stderr again, as without
Python.

A line logged by one of the library's own threads (a session's worker, a
communicator's thread) is handed to the logger's handlers by a thread of
this module, in order, never on the library's thread: a handler may then
call back into the session (``state_dict()``, ``run()``, ``close()``), which
waits for that library thread, without waiting for itself. A line logged on
a Python thread (while it opens a session, say) is handled on that thread
when no earlier line is still queued. ``Session.run()``, ``flush()`` and
``close()`` return once the lines logged before them are handled
(``drain()``).
"""
import atexit
import collections
import logging
import os
import sys
import threading

from . import _abi

LOGGER = logging.getLogger("ddphooks")

_PY_LEVELS = {
    _abi.DDPH_LOG_ERROR: logging.ERROR,
    _abi.DDPH_LOG_WARN: logging.WARNING,
    _abi.DDPH_LOG_INFO: logging.INFO,
    _abi.DDPH_LOG_DEBUG: logging.DEBUG,
}
_ENV_LEVELS = {"error": _abi.DDPH_LOG_ERROR, "warn": _abi.DDPH_LOG_WARN,
               "info": _abi.DDPH_LOG_INFO, "debug": _abi.DDPH_LOG_DEBUG}

_lock = threading.Lock()
_lib = None
_enabled = True  # False after uninstall(), until install()
_installed_level = None


def _text(b):
    return None if b is None else b.decode("utf-8", "replace")


# Records made on library threads, waiting for the emitting thread.
_queue = collections.deque()
_queue_cv = threading.Condition()
_busy = 0  # records taken from the queue and not yet handled
_emitter = None


def _on_library_thread():
    # A thread Python did not start (ctypes gives it a dummy Thread object).
    return isinstance(threading.current_thread(), threading._DummyThread)


def _emit_loop():
    global _busy
    while True:
        with _queue_cv:
            while not _queue:
                _queue_cv.wait()
            record = _queue.popleft()
            _busy += 1
        try:
            LOGGER.handle(record)
        except Exception:  # noqa: BLE001 - a broken handler loses the line, not the thread
            pass
        finally:
            with _queue_cv:
                _busy -= 1
                _queue_cv.notify_all()


def _enqueue(record):
    global _emitter
    with _queue_cv:
        if _emitter is None:
            _emitter = threading.Thread(target=_emit_loop, name="ddphooks-log", daemon=True)
            _emitter.start()
        _queue.append(record)
        _queue_cv.notify_all()


def drain(timeout=None):
    """Waits until every line queued so far has been handled (not when called
    from a handler, which would wait for itself). True when drained."""
    if _emitter is None or threading.current_thread() is _emitter:
        return True
    if sys.is_finalizing() or not _emitter.is_alive():  # nobody left to handle them
        return False
    with _queue_cv:
        return _queue_cv.wait_for(lambda: not _queue and _busy == 0, timeout)


def _deliver(user, level, family, rank, message):
    # Runs on whichever thread logged (a session's worker, a communicator's
    # thread); an exception must not reach the C caller.
    try:
        py_level = _PY_LEVELS.get(level, logging.ERROR)
        if not LOGGER.isEnabledFor(py_level):
            return
        fam = _text(family)
        where = (fam or "ddph") + (" [rank %d]" % rank if rank >= 0 else "")
        record = LOGGER.makeRecord(LOGGER.name, py_level, __file__, 0, "%s: %s",
                                   (where, _text(message)), None,
                                   extra={"family": fam, "rank": int(rank)})
        with _queue_cv:
            queued = bool(_queue) or _busy > 0
        if queued or _on_library_thread():
            _enqueue(record)  # handled on this module's thread: see the module's doc
        else:
            LOGGER.handle(record)
    except Exception:  # noqa: BLE001 - a broken handler loses the line, not the process
        pass


_SINK = _abi.LogFn(_deliver)  # kept alive for as long as the library may call it


def library_level():
    """The level the library filters at: DDPH_LOG_LEVEL, else the logger's."""
    env = os.environ.get("DDPH_LOG_LEVEL")
    if env in _ENV_LEVELS:
        return _ENV_LEVELS[env]
    effective = LOGGER.getEffectiveLevel()
    if effective <= logging.DEBUG:
        return _abi.DDPH_LOG_DEBUG
    if effective <= logging.INFO:
        return _abi.DDPH_LOG_INFO
    if effective <= logging.WARNING:
        return _abi.DDPH_LOG_WARN
    return _abi.DDPH_LOG_ERROR


def attach(lib):
    """Called by ddphooks._library when it loads libddph.so: installs the
    sink unless uninstall() was called before."""
    global _lib
    with _lock:
        _lib = lib
    if _enabled:
        install()


def install():
    """Sends the library's lines to the "ddphooks" logger at library_level()
    (again: call it after changing the logger's level)."""
    global _enabled, _installed_level
    with _lock:
        _enabled = True
        if _lib is None:  # not loaded yet: attach() installs it
            return
        level = library_level()
        _lib.ddph_set_log_sink(_SINK, None, level)
        _installed_level = level


def refresh():
    """install() again only if the level changed (cheap; at Session open)."""
    if _lib is not None and _enabled and library_level() != _installed_level:
        install()


def uninstall():
    """Sends the library's lines to stderr again (level DDPH_LOG_LEVEL)."""
    global _enabled, _installed_level
    with _lock:
        _enabled = False
        if _lib is not None:
            _lib.ddph_set_log_sink(_abi.LogFn(), None, _abi.DDPH_LOG_ERROR)
        _installed_level = None


# Before the interpreter tears down the callback: lines logged after this
# (by a session closed later at exit) go to stderr.
atexit.register(uninstall)
