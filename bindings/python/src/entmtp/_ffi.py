"""The compiled CFFI module (out-of-line API mode)."""
try:
    from ._entmtp import ffi, lib  # noqa: F401
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(
        "entmtp: the compiled extension entmtp._entmtp cannot be loaded (%s). Install the "
        "package with `pip install ./bindings/python` (it builds the C library when no "
        "installed one is found), and import it from outside bindings/python/src." % e) from e

try:
    import numpy as np
except ImportError:  # numpy is optional: arrays are returned as lists without it
    np = None
