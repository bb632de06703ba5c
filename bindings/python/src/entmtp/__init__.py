"""EntMTP for Python: speculative decoding with Medusa/Hydra heads, tree
attention, typical acceptance and a per-step tree scheduler.

A thin layer over the C library (CFFI, API mode) whose declarations are
generated from include/entmtp.h. Every failing call raises an EntmtpError
subclass carrying the status and the library's message. Handles are freed by
close(), by `with` blocks or by the garbage collector, always in a safe order
(sessions before their model, heads and bank; policies detached first).

    import entmtp
    with entmtp.Model("model.gguf") as model:
        heads = model.load_heads("medusa.safetensors")
        bank = entmtp.Bank(max_depth=heads.n_heads)
        bank.add_builtin("chain_2"); bank.add_builtin("mc_sim_7b_63")
        session = entmtp.Session(model, heads, bank)
        session.set_policy(entmtp.Policy.hysteresis(tau_on=0.3, tau_off=0.1))
        session.prefill(model.tokenize("Hello", add_special=True))
        print(model.detokenize(session.generate(64)))

or, as `entmtp generate` does it, with the drafter shipped for the model
(matched by its identity) and the bank's default policy:

    session = entmtp.Session.for_model(model)
    for piece in session.stream("Tell me about owls", 128):
        print(piece, end="")
    print(session.stats())   # accept length, warm tokens/s, speedup over AR
"""
from ._ffi import ffi, lib
from . import _callbacks  # noqa: F401  (registers the extern "Python" callbacks)
from .bank import Bank, TreeBuffers, TreeInfo, builtin_tree_names
from .drafter import Drafter, default_search_path, find_drafter
from .enums import Backend, Compute, HeadsKind, PolicyKind, Status
from .errors import (BackendError, BufferTooSmallError, CallbackError, EntmtpError, FormatError,
                     InvalidArgumentError, InvalidConfigError, InvalidTreeError, IoError, KVFullError,
                     MismatchError, NotFoundError, OutOfMemoryError, OutOfRangeError, StateError,
                     UnsupportedError, error_class, last_error)
from .model import Heads, HeadsInfo, Model, ModelInfo
from .policy import Features, Outcome, Policy, kind_from_name, kind_name
from .session import Session, SessionStats, StepResult

#: Header version the bindings were generated from (ENTMTP_VERSION_*).
HEADER_VERSION = (lib.ENTMTP_VERSION_MAJOR, lib.ENTMTP_VERSION_MINOR, lib.ENTMTP_VERSION_PATCH)
ABI_VERSION = lib.ENTMTP_ABI_VERSION
# limits of the library actually loaded (entmtp_limit), not compile-time constants
MAX_HEADS = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_HEADS)
MAX_LADDER = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_LADDER)
MAX_STOP_TOKENS = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_STOP_TOKENS)
__version__ = "%d.%d.%d" % HEADER_VERSION


def version():
    """Version string of the library actually loaded ("MAJOR.MINOR.PATCH")."""
    return ffi.string(lib.entmtp_version_string()).decode()


def version_number():
    """ENTMTP_VERSION_NUMBER of the library actually loaded."""
    return int(lib.entmtp_version_number())


def status_string(status):
    """Short English name of a status code."""
    return ffi.string(lib.entmtp_status_string(int(status))).decode()


def clear_error():
    """Clear this thread's last-error message."""
    lib.entmtp_clear_error()


__all__ = [
    "ABI_VERSION", "Backend", "BackendError", "Compute", "Bank", "BufferTooSmallError", "CallbackError",
    "Drafter", "default_search_path", "find_drafter",
    "EntmtpError", "Features", "FormatError", "HEADER_VERSION", "Heads", "HeadsInfo", "HeadsKind",
    "InvalidArgumentError", "InvalidConfigError", "InvalidTreeError", "IoError", "KVFullError",
    "MAX_HEADS", "MAX_LADDER", "MAX_STOP_TOKENS", "MismatchError", "Model", "ModelInfo",
    "NotFoundError", "Outcome", "OutOfMemoryError", "OutOfRangeError", "Policy", "PolicyKind",
    "Session", "SessionStats", "StateError", "Status", "StepResult", "TreeBuffers", "TreeInfo",
    "UnsupportedError", "builtin_tree_names", "clear_error", "error_class", "kind_from_name",
    "kind_name", "last_error", "status_string", "version", "version_number",
]
