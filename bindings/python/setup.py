"""setuptools entry point: builds entmtp._entmtp with CFFI (see entmtp_build.py)."""
import os
import re

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    """The library version, from the generated cdef (i.e. from include/entmtp.h)."""
    with open(os.path.join(HERE, "entmtp", "_cdef.h"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(r"#define ENTMTP_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


setup(
    version=version(),
    packages=["entmtp"],
    package_data={"entmtp": ["_cdef.h", "py.typed"]},
    cffi_modules=["entmtp_build.py:ffibuilder"],
)
