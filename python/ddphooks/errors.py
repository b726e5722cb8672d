"""ddph errors as Python exceptions."""
import enum

from . import _abi


class Code(enum.IntEnum):
    """ddph_code_t."""
    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    NOT_FOUND = 3
    VERSION_MISMATCH = 4
    COMM_FAILURE = 5
    TIMEOUT = 6
    OUT_OF_MEMORY = 7
    INTERNAL = 8
    NONFINITE = 9


class DDPHError(RuntimeError):
    """An error reported by libddph.so or a plugin.

    ``code`` is a :class:`Code`, ``message`` the library's text (which names
    the field, file or peer at fault).
    """

    def __init__(self, code, message):
        try:
            code = Code(int(code))
        except ValueError:
            code = int(code)
        self.code = code
        self.message = message
        name = code.name if isinstance(code, Code) else str(code)
        super().__init__("DDPH_%s: %s" % (name, message))

    def __reduce__(self):  # picklable, e.g. across torch futures and processes
        return (type(self), (int(self.code), self.message))


def take(lib, err):
    """Turns an owned ddph_error_t* into a DDPHError (freeing it); None for NULL."""
    if not err:
        return None
    code = lib.ddph_error_code(err)
    message = (lib.ddph_error_message(err) or b"").decode("utf-8", "replace")
    lib.ddph_error_free(err)
    return DDPHError(code, message)


def check(lib, err):
    """Raises the DDPHError of an owned ddph_error_t*, if any."""
    e = take(lib, err)
    if e is not None:
        raise e


def make(lib, code, message):
    """A new ddph_error_t* (for callbacks that report to the library)."""
    host = lib.ddph_host().contents
    # An error's text must not be cut short by a NUL: it is shown as \0.
    text = str(message).replace("\0", "\\0").encode("utf-8", "replace")
    return host.error_new(_abi.checked_int(code, "error code", _abi.C_INT), text)
