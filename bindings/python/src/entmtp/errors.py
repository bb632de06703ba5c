"""Exceptions: every failing library call raises an EntmtpError subclass that
carries the entmtp_status (`.status`) and the library's message
(`.message`, from entmtp_last_error())."""
from ._ffi import ffi, lib


class EntmtpError(Exception):
    """A failing EntMTP call. `status` is the entmtp_status code (an int, also
    available as `status_enum`), `message` the library's explanation naming the
    file, field, index or value that was wrong."""

    def __init__(self, status, message=""):
        self.status = int(status)
        self.message = message or ""
        super().__init__(self.status, self.message)

    @property
    def status_enum(self):
        from .enums import Status
        try:
            return Status(self.status)
        except ValueError:
            return self.status

    @property
    def status_name(self):
        s = lib.entmtp_status_string(self.status)
        text = ffi.string(s).decode("utf-8", "replace") if s != ffi.NULL else ""
        return text.split(":", 1)[0] or "ENTMTP_STATUS_%d" % self.status

    def __str__(self):
        return "%s [%s]" % (self.message, self.status_name) if self.message else self.status_name

    def __repr__(self):
        return "%s(%s, %r)" % (type(self).__name__, self.status_name, self.message)


class InvalidArgumentError(EntmtpError, ValueError):
    """ENTMTP_ERR_INVALID_ARGUMENT: NULL pointer, bad size, bad flag value."""


class OutOfMemoryError(EntmtpError, MemoryError):
    """ENTMTP_ERR_OUT_OF_MEMORY."""


class IoError(EntmtpError):
    """ENTMTP_ERR_IO: a file cannot be opened, read, written or mapped."""


class FormatError(EntmtpError):
    """ENTMTP_ERR_FORMAT: the file is present but malformed or corrupt."""


class UnsupportedError(EntmtpError):
    """ENTMTP_ERR_UNSUPPORTED: valid input the library does not support."""


class InvalidTreeError(EntmtpError, ValueError):
    """ENTMTP_ERR_INVALID_TREE: tree choices fail validation (the message names the path)."""


class InvalidConfigError(EntmtpError, ValueError):
    """ENTMTP_ERR_INVALID_CONFIG: policy, session or bank settings are inconsistent."""


class OutOfRangeError(EntmtpError, IndexError):
    """ENTMTP_ERR_OUT_OF_RANGE: an index or token id outside its range."""


class KVFullError(EntmtpError):
    """ENTMTP_ERR_KV_FULL: the KV cache is full. Session.step() attaches the
    partial StepResult as `.result`, Session.generate() the emitted tokens as
    `.tokens`."""


class MismatchError(EntmtpError):
    """ENTMTP_ERR_MISMATCH: heads or bank do not fit the model."""


class BackendError(EntmtpError):
    """ENTMTP_ERR_BACKEND: the backend (CUDA) is unavailable or failed."""


class CallbackError(EntmtpError):
    """ENTMTP_ERR_CALLBACK: a callback reported failure. When a Python
    callback raised, that exception is the `__cause__`."""


class StateError(EntmtpError):
    """ENTMTP_ERR_STATE: the call is not valid in the object's state (also
    raised when a closed handle is used)."""


class NotFoundError(EntmtpError, LookupError):
    """ENTMTP_ERR_NOT_FOUND: a named object (tree, key) does not exist."""


class BufferTooSmallError(EntmtpError):
    """ENTMTP_ERR_BUFFER_TOO_SMALL (handled inside the bindings)."""


_BY_STATUS = {
    lib.ENTMTP_ERR_INVALID_ARGUMENT: InvalidArgumentError,
    lib.ENTMTP_ERR_OUT_OF_MEMORY: OutOfMemoryError,
    lib.ENTMTP_ERR_IO: IoError,
    lib.ENTMTP_ERR_FORMAT: FormatError,
    lib.ENTMTP_ERR_UNSUPPORTED: UnsupportedError,
    lib.ENTMTP_ERR_INVALID_TREE: InvalidTreeError,
    lib.ENTMTP_ERR_INVALID_CONFIG: InvalidConfigError,
    lib.ENTMTP_ERR_OUT_OF_RANGE: OutOfRangeError,
    lib.ENTMTP_ERR_KV_FULL: KVFullError,
    lib.ENTMTP_ERR_MISMATCH: MismatchError,
    lib.ENTMTP_ERR_BACKEND: BackendError,
    lib.ENTMTP_ERR_CALLBACK: CallbackError,
    lib.ENTMTP_ERR_STATE: StateError,
    lib.ENTMTP_ERR_NOT_FOUND: NotFoundError,
    lib.ENTMTP_ERR_BUFFER_TOO_SMALL: BufferTooSmallError,
}


def error_class(status):
    """The exception class for an entmtp_status (EntmtpError for unknown codes)."""
    return _BY_STATUS.get(int(status), EntmtpError)


def last_error():
    """This thread's last-error message ("" if none)."""
    return ffi.string(lib.entmtp_last_error()).decode("utf-8", "replace")


def make_error(status, message=None):
    return error_class(status)(status, last_error() if message is None else message)


def check(status):
    """Raise the matching EntmtpError when `status` is not ENTMTP_OK."""
    if status != lib.ENTMTP_OK:
        raise make_error(status)
