"""CFFI build script (out-of-line API mode) for the `entmtp._entmtp` extension.

Used by setup.py through `cffi_modules`; can also be run directly
(`python3 entmtp_build.py`) to compile the extension in place.

The declarations come from entmtp/_cdef.h, generated from include/entmtp.h by
gen_cdef.py, plus the `extern "Python"` callbacks below. The compiler and
linker flags come from `pkg-config --cflags --libs entmtp`, so the installed
library must be visible to pkg-config (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig).
The library directory is also recorded as the extension's run path, so the
module finds libentmtp.so.N without LD_LIBRARY_PATH; set ENTMTP_NO_RPATH=1 to
leave it out (for packagers who install the library system-wide).
"""
import os
import shlex
import subprocess

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


def pkg_config(*args):
    cmd = [os.environ.get("PKG_CONFIG", "pkg-config")] + list(args) + ["entmtp"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError("entmtp: cannot run pkg-config (%s); install pkg-config" % e)
    if res.returncode != 0:
        raise RuntimeError(
            "entmtp: `%s` failed: %s\nInstall the EntMTP C library first "
            "(cmake --install BUILD --prefix P) and set PKG_CONFIG_PATH=P/lib/pkgconfig."
            % (" ".join(cmd), res.stderr.strip()))
    return shlex.split(res.stdout)


def build_flags():
    flags = {"include_dirs": [], "library_dirs": [], "libraries": [], "define_macros": [],
             "extra_compile_args": [], "extra_link_args": [], "runtime_library_dirs": []}
    for f in pkg_config("--cflags"):
        if f.startswith("-I"):
            flags["include_dirs"].append(os.path.normpath(f[2:]))
        elif f.startswith("-D"):
            name, _, value = f[2:].partition("=")
            flags["define_macros"].append((name, value or None))
        else:
            flags["extra_compile_args"].append(f)
    for f in pkg_config("--libs"):
        if f.startswith("-L"):
            flags["library_dirs"].append(os.path.normpath(f[2:]))
        elif f.startswith("-l"):
            flags["libraries"].append(f[2:])
        else:
            flags["extra_link_args"].append(f)
    if os.environ.get("ENTMTP_NO_RPATH", "") not in ("1", "yes", "true"):
        flags["runtime_library_dirs"] = [os.path.abspath(d) for d in flags["library_dirs"]]
    return flags


def read_cdef():
    with open(os.path.join(HERE, "entmtp", "_cdef.h"), encoding="utf-8") as f:
        return f.read() + CALLBACKS


ffibuilder = FFI()
ffibuilder.cdef(read_cdef())
# the bindings expose the EXPERIMENTAL section (marked so in their docs)
ffibuilder.set_source("entmtp._entmtp", "#define ENTMTP_EXPERIMENTAL_API\n#include <entmtp.h>\n", **build_flags())

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=HERE, verbose=True)
