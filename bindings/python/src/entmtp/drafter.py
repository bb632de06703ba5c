"""The drafter (heads + bank) shipped for a model, found by the model's
identity as the CLI finds it (entmtp_drafter_find), and the session the CLI
would decode with (Session.for_model)."""
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Optional

from ._ffi import ffi, lib
from ._util import new_struct, text
from .errors import NotFoundError, check

if TYPE_CHECKING:
    from .model import Model

#: the directory of the heads shipped inside this package (the wheel's copy of heads/)
PACKAGE_HEADS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heads")


@dataclasses.dataclass(frozen=True)
class Drafter:
    """entmtp_drafter: the heads file that matched, its bank file (None when
    there is none) and why it matched ("matched by identity (...)")."""
    heads_path: str
    bank_path: Optional[str]
    reason: str


def default_search_path() -> str:
    """Where drafters are looked for, in order: $ENTMTP_HEADS_DIR, the heads
    shipped in this package, <sys.prefix>/share/entmtp/heads (an installed
    EntMTP), joined with ':'."""
    dirs = [os.environ.get("ENTMTP_HEADS_DIR"), PACKAGE_HEADS_DIR,
            os.path.join(sys.prefix, "share", "entmtp", "heads")]
    return ":".join(d for d in dirs if d)


def find_drafter(model: "Model", search_path: Optional[str] = None) -> Drafter:
    """The first drafter in `search_path` (directories separated by ':';
    default: default_search_path()) whose recorded model identity
    (architecture, hidden size, layers, vocabulary size and hash, in the heads'
    X.train.json) equals `model`'s: never by file name. Raises NotFoundError
    when none matches; its message (and `.reason`) names each candidate and
    the field that differed."""
    path = default_search_path() if search_path is None else os.fspath(search_path)
    out = new_struct("entmtp_drafter")
    st = lib.entmtp_drafter_find(model._ptr, text(path), out)
    reason = ffi.string(out.reason).decode("utf-8", "replace")
    if st == lib.ENTMTP_ERR_NOT_FOUND:
        err = NotFoundError(st, reason)
        err.reason = reason
        raise err
    check(st)
    bank = ffi.string(out.bank_path).decode("utf-8", "replace")
    return Drafter(heads_path=ffi.string(out.heads_path).decode("utf-8", "replace"), bank_path=bank or None,
                   reason=reason)
