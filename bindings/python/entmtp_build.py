"""CFFI build script (out-of-line API mode) for the `entmtp._entmtp` extension.

bindings/python/CMakeLists.txt (run by scikit-build-core from pyproject.toml)
calls `python entmtp_build.py --emit OUT.c` to write the extension's C source
and compiles it against include/entmtp.h, linked to an installed libentmtp or
to the one it builds into the package.

The declarations come from src/entmtp/_cdef.h, generated from
include/entmtp.h by gen_cdef.py, plus the `extern "Python"` callbacks below.
"""
import os
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

# Trampolines for the C callbacks; the Python side is in entmtp/_callbacks.py.
CALLBACKS = """
extern "Python" entmtp_status _entmtp_py_select(void *, const entmtp_features *, int32_t, int32_t *);
extern "Python" void _entmtp_py_observe(void *, const entmtp_outcome *);
extern "Python" void _entmtp_py_reset(void *);
extern "Python" int _entmtp_py_tokens(const int32_t *, int32_t, void *);
extern "Python" int _entmtp_py_progress(float, const char *, void *);
"""


def read_cdef():
    with open(os.path.join(HERE, "src", "entmtp", "_cdef.h"), encoding="utf-8") as f:
        return f.read() + CALLBACKS


ffibuilder = FFI()
ffibuilder.cdef(read_cdef())
# the bindings expose the EXPERIMENTAL section (marked so in their docs)
ffibuilder.set_source("entmtp._entmtp", "#define ENTMTP_EXPERIMENTAL_API\n#include <entmtp.h>\n")

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--emit":
        sys.exit("usage: entmtp_build.py --emit OUT.c")
    ffibuilder.emit_c_code(sys.argv[2])
