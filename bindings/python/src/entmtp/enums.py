"""Integer enums mirroring the C enums; built from the compiled module, so
they always match include/entmtp.h."""
import enum

from ._ffi import lib


def _from_prefix(name, prefix, extra=()):
    members = {n[len(prefix):]: getattr(lib, n) for n in dir(lib) if n.startswith(prefix)}
    members.update({n: getattr(lib, "ENTMTP_" + n) for n in extra})
    return enum.IntEnum(name, sorted(members.items(), key=lambda kv: kv[1]))


#: entmtp_status: OK, ERR_INVALID_ARGUMENT, ... (names without the ENTMTP_ prefix)
Status = _from_prefix("Status", "ENTMTP_ERR_", extra=("OK", "STOPPED"))
Status.__doc__ = "entmtp_status codes (ERR_* without the ENTMTP_ prefix, OK and STOPPED)."
#: entmtp_backend: AUTO, CPU, CUDA
Backend = _from_prefix("Backend", "ENTMTP_BACKEND_")
#: entmtp_compute_type: NATIVE, F32
Compute = _from_prefix("Compute", "ENTMTP_COMPUTE_")
#: entmtp_heads_kind: MEDUSA, HYDRA
HeadsKind = _from_prefix("HeadsKind", "ENTMTP_HEADS_")
#: entmtp_policy_kind: STATIC, LADDER, HYSTERESIS, UCB, CUSTOM
PolicyKind = _from_prefix("PolicyKind", "ENTMTP_POLICY_")


def _coerce(enum_cls, value, what):
    """An enum member from a member, an int or a case-insensitive name."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        try:
            return enum_cls[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    from .errors import InvalidArgumentError
    raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT, "%s: %r is not one of %s" % (
        what, value, ", ".join(m.name.lower() for m in enum_cls)))
