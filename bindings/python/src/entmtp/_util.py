"""Small conversions shared by the wrappers."""
import os

from ._ffi import ffi, lib
from . import _ffi

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def fspath(path):
    """bytes for a C path argument (str, bytes or os.PathLike)."""
    p = os.fspath(path)
    return p if isinstance(p, bytes) else os.fsencode(p)


def text(s):
    """bytes for a C string argument."""
    return s if isinstance(s, bytes) else str(s).encode("utf-8")


def cstr(ptr):
    return ffi.string(ptr).decode("utf-8", "replace") if ptr != ffi.NULL else None


def new_struct(ctype):
    """A zeroed versioned struct with struct_size set."""
    p = ffi.new(ctype + " *")
    p.struct_size = ffi.sizeof(ctype)
    return p


def default_struct(ctype, init, *args):
    """A versioned struct filled with the library's defaults by its
    entmtp_*_init(ptr, sizeof, ...) function."""
    from .errors import check
    p = ffi.new(ctype + " *")
    check(init(p, ffi.sizeof(ctype), *args))
    return p


def float_array(values):
    """(cdata float[], n) from an iterable of numbers (the cdata keeps it alive)."""
    vals = [float(v) for v in values]
    return ffi.new("float[]", vals) if vals else ffi.NULL, len(vals)


def int32_array(values, what):
    """(cdata int32_t[], n, keepalive) from a list/tuple/iterable or a numpy array.
    Values outside int32_t are an OutOfRangeError (never silently wrapped)."""
    from .errors import InvalidArgumentError, OutOfRangeError
    np = _ffi.np
    if np is not None and isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT,
                                       "%s: expected a 1-D array, got shape %s" % (what, values.shape))
        if values.dtype.kind not in "iu":
            raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT,
                                       "%s: expected integers, got dtype %s" % (what, values.dtype))
        if values.size and (values.min() < INT32_MIN or values.max() > INT32_MAX):
            raise OutOfRangeError(lib.ENTMTP_ERR_OUT_OF_RANGE, "%s: a value does not fit int32_t" % what)
        arr = np.ascontiguousarray(values, dtype=np.int32)
        return ffi.from_buffer("int32_t[]", arr), int(arr.size), arr
    vals = []
    for i, v in enumerate(values):
        try:
            v = int(v.__index__()) if not isinstance(v, int) else v
        except AttributeError:
            raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT,
                                       "%s[%d] = %r is not an integer" % (what, i, v)) from None
        if not INT32_MIN <= v <= INT32_MAX:
            raise OutOfRangeError(lib.ENTMTP_ERR_OUT_OF_RANGE,
                                  "%s[%d] = %d does not fit int32_t" % (what, i, v))
        vals.append(v)
    arr = ffi.new("int32_t[]", vals)
    return arr, len(vals), arr


def copy_array(ptr, n, shape=None, dtype="int32"):
    """Copy n C values into a numpy array (or a list / list of lists without numpy)."""
    np = _ffi.np
    ctype = {"int32": "int32_t", "uint8": "uint8_t", "float32": "float"}[dtype]
    if np is not None:
        a = np.frombuffer(ffi.buffer(ffi.cast(ctype + " *", ptr), n * ffi.sizeof(ctype)),
                          dtype=getattr(np, dtype)).copy()
        return a.reshape(shape) if shape is not None else a
    flat = list(ffi.unpack(ffi.cast(ctype + " *", ptr), n)) if n else []
    if shape is None or len(shape) == 1:
        return flat
    rows, cols = shape
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]
