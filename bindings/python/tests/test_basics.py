"""Version, status codes, enums, the error hierarchy and the generated cdef."""
import os
import subprocess
import sys

import pytest

import entmtp
from entmtp import errors

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "gen_cdef.py")


def test_version_matches_header():
    assert entmtp.version() == "%d.%d.%d" % entmtp.HEADER_VERSION
    major, minor, patch = entmtp.HEADER_VERSION
    assert entmtp.version_number() == major * 10000 + minor * 100 + patch
    assert entmtp.__version__ == entmtp.version()
    assert entmtp.ABI_VERSION == 1
    # run-time limits of the loaded library (entmtp_limit), no longer header constants
    assert (entmtp.MAX_HEADS, entmtp.MAX_LADDER, entmtp.MAX_STOP_TOKENS) == (16, 16, 64)
    assert entmtp.lib.entmtp_limit(entmtp.lib.ENTMTP_LIMIT_MAX_TREE_NODES) >= 256


def test_status_strings_and_enums():
    assert entmtp.Status.OK == 0
    assert entmtp.Status.FORMAT == entmtp.lib.ENTMTP_ERR_FORMAT
    assert entmtp.status_string(entmtp.Status.FORMAT).startswith("ENTMTP_ERR_FORMAT")
    assert entmtp.status_string(0).startswith("ENTMTP_OK")
    assert [s.name for s in entmtp.Status][-2:] == ["BUFFER_TOO_SMALL", "STOPPED"]
    assert entmtp.Backend.CPU == 1 and entmtp.HeadsKind.HYDRA == 2
    assert entmtp.PolicyKind.CUSTOM == 4


def test_every_status_has_its_exception_class():
    for s in entmtp.Status:
        if s in (entmtp.Status.OK, entmtp.Status.STOPPED):  # not errors
            continue
        cls = entmtp.error_class(s)
        assert cls is not entmtp.EntmtpError, s
        e = cls(s, "what went wrong")
        assert isinstance(e, entmtp.EntmtpError)
        assert e.status == s and e.status_enum == s and e.message == "what went wrong"
        assert e.status_name == "ENTMTP_" + ("ERR_" + s.name)
        assert "what went wrong" in str(e) and e.status_name in str(e)
    assert entmtp.error_class(999) is entmtp.EntmtpError
    assert issubclass(entmtp.InvalidTreeError, ValueError)
    assert issubclass(entmtp.OutOfRangeError, IndexError)
    assert issubclass(entmtp.NotFoundError, LookupError)


def test_last_error_and_clear():
    entmtp.clear_error()
    assert entmtp.last_error() == ""
    b = entmtp.Bank()
    with pytest.raises(entmtp.NotFoundError) as ei:
        b.find("nope")
    assert "nope" in entmtp.last_error()
    assert ei.value.message == entmtp.last_error()
    entmtp.clear_error()
    assert entmtp.last_error() == ""


def test_check_passes_ok_and_raises_with_message():
    errors.check(0)
    with pytest.raises(entmtp.KVFullError):
        errors.check(entmtp.lib.ENTMTP_ERR_KV_FULL)


def test_builtin_tree_names():
    names = entmtp.builtin_tree_names()
    for n in ("medusa_vicuna_7b_stage2", "mc_sim_7b_63", "hydra_default", "chain_1", "chain_5", "ar"):
        assert n in names
    assert entmtp.Bank.builtin_names() == names


def test_generated_cdef_is_up_to_date():
    r = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gen_cdef_check_detects_a_changed_header(tmp_path):
    root = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
    with open(os.path.join(root, "include", "entmtp.h")) as f:
        text = f.read()
    hdr = tmp_path / "entmtp.h"
    hdr.write_text(text.replace("#define ENTMTP_ABI_VERSION 1",
                                "#define ENTMTP_ABI_VERSION 1\n#define ENTMTP_NEW_LIMIT (4 << 2)"))
    out = tmp_path / "_cdef.h"
    r = subprocess.run([sys.executable, GEN, "--header", str(hdr), "--output", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "#define ENTMTP_NEW_LIMIT 16" in out.read_text()
    r = subprocess.run([sys.executable, GEN, "--check", "--output", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "ENTMTP_NEW_LIMIT" in r.stderr and "stale" in r.stderr


def test_gen_cdef_constant_folding():
    sys.path.insert(0, os.path.dirname(GEN))
    try:
        import gen_cdef
    finally:
        sys.path.pop(0)
    assert gen_cdef.eval_int("(0 * 10000 + 1 * 100 + 2)") == 102
    assert gen_cdef.eval_int("0x10u") == 16 and gen_cdef.eval_int("010") == 8
    assert gen_cdef.eval_int("7 / 2") == 3
    assert gen_cdef.eval_int('"text"') is None and gen_cdef.eval_int("") is None
    assert gen_cdef.eval_int("__import__('os')") is None
