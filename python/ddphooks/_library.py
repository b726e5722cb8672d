"""Finds and loads libddph.so.

Search order (the first that exists wins):
  1. $DDPH_LIBRARY (a file; when set, nothing else is tried);
  2. libddph.so in lib/ of this package (a wheel carries it there), or
     beside the package (a relocated install);
  3. the library directory `cmake --install` or `pip install` recorded in
     _install_paths.py;
  4. a build tree above a source checkout (build-py/, build/: <dir>/lib);
  5. <sys.prefix>/lib, /usr/local/lib, and the dynamic loader's own search
     (ctypes.util.find_library).
The loader then finds its plugins in ddphooks/ beside libddph.so
(docs/config.md), so the plugins follow the library that was chosen.
"""
import ctypes
import ctypes.util
import os
import sys
import threading

from . import _abi, logs

_NAMES = ("libddph.so", "libddph.so.1")
_lock = threading.Lock()
_lib = None
_path = None


def candidates():
    """Every path searched, in order (existing or not), for error messages."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    env = os.environ.get("DDPH_LIBRARY")
    if env:
        out.append(env)
    out += [os.path.join(here, "lib", n) for n in _NAMES]
    out += [os.path.join(here, n) for n in _NAMES]
    try:
        from . import _install_paths  # written by `cmake --install` or `pip install`
        out += [os.path.join(_install_paths.LIBDIR, n) for n in _NAMES]
    except ImportError:
        pass
    # A source checkout: python/ddphooks -> the repository root.
    root = os.path.dirname(os.path.dirname(here))
    for build in ("build-py", "build"):
        out.append(os.path.join(root, build, "lib", "libddph.so"))
    for prefix in (sys.prefix, "/usr/local"):
        out += [os.path.join(prefix, "lib", n) for n in _NAMES]
    return out


def path():
    """The path of the loaded libddph.so (loads it first)."""
    load()
    return _path


def load():
    """libddph.so as a ctypes.CDLL with its prototypes declared; loaded once."""
    global _lib, _path
    with _lock:
        if _lib is not None:
            return _lib
        env = os.environ.get("DDPH_LIBRARY")
        if env and not os.path.isfile(env):  # an explicit choice is never second-guessed
            raise OSError("DDPH_LIBRARY=%s does not exist" % env)
        tried = candidates()
        found = next((p for p in tried if os.path.isfile(p)), None)
        if found is None:
            found = ctypes.util.find_library("ddph")
            tried.append("ctypes.util.find_library('ddph')")
        if found is None:
            raise OSError("libddph.so not found; set DDPH_LIBRARY to its path. Searched: "
                          + ", ".join(tried))
        # RTLD_GLOBAL is not needed: plugins use only the host table they are handed.
        _lib = _abi.declare(ctypes.CDLL(found))
        _path = found
        logs.attach(_lib)  # the library's log lines go to logging (ddphooks.logs)
        return _lib
