"""TopologyBank: draft trees compiled into verifier buffers."""
import dataclasses
import operator
import os
from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Optional, Sequence, Union

from ._ffi import ffi, lib
from ._handle import Handle
from ._util import INT32_MAX, INT32_MIN, copy_array, cstr, default_struct, fspath, new_struct, text
from .errors import InvalidArgumentError, InvalidTreeError, NotFoundError, OutOfRangeError, check

if TYPE_CHECKING:
    from .policy import Policy
    from .enums import PolicyKind

PathArg = Union[str, bytes, "os.PathLike[str]"]
TreeRef = Union[int, str]  # a tree by index or by name


@dataclasses.dataclass(frozen=True)
class TreeInfo:
    """entmtp_tree_info of one tree (and its index in the bank)."""
    index: int
    name: str
    n_nodes: int
    depth: int
    n_paths: int
    n_leaves: int
    mean_accept_length: float
    tokens_per_second: float


@dataclasses.dataclass(frozen=True)
class TreeBuffers:
    """The compiled verifier buffers of one tree (copies), in the layout of
    the Medusa reference: numpy arrays when numpy is importable, else lists."""
    n_nodes: int
    depth: int
    topk: int
    n_leaves: int
    attn_mask: Any         # (n_nodes, n_nodes) uint8
    tree_indices: Any      # (n_nodes,) int32
    position_ids: Any      # (n_nodes,) int32
    retrieve_indices: Any  # (n_leaves, depth + 1) int32, padded with -1
    parents: Any           # (n_nodes,) int32, -1 for the root
    node_ranks: Any        # (n_nodes,) int32, -1 for the root


def builtin_tree_names() -> List[str]:
    """Names of the library's built-in trees."""
    names: List[str] = []
    i = 0
    while True:
        p = lib.entmtp_builtin_tree_name(i)
        if p == ffi.NULL:
            return names
        names.append(cstr(p))
        i += 1


def _params(max_depth: Optional[int], topk: Optional[int], max_nodes: Optional[int]) -> Any:
    p = default_struct("entmtp_bank_params", lib.entmtp_bank_params_init)
    if max_depth is not None:
        p.max_depth = max_depth
    if topk is not None:
        p.topk = topk
    if max_nodes is not None:
        p.max_nodes = max_nodes
    return p


class Bank(Handle):
    """A list of draft trees. Bank(max_depth, topk, max_nodes) creates an
    empty bank (None keeps the library default: 16, 10, 256); Bank.load()
    reads a bank file. len(bank) is the number of trees; iterating yields
    TreeInfo; `name in bank` tests for a tree."""

    def __init__(self, max_depth: Optional[int] = None, topk: Optional[int] = None,
                 max_nodes: Optional[int] = None, *, _ptr: Any = None) -> None:
        if _ptr is None:
            out = ffi.new("entmtp_bank **")
            check(lib.entmtp_bank_create(_params(max_depth, topk, max_nodes), out))
            _ptr = out[0]
        self._own(_ptr, lib.entmtp_bank_free)

    @classmethod
    def create(cls, max_depth: Optional[int] = None, topk: Optional[int] = None,
               max_nodes: Optional[int] = None) -> "Bank":
        return cls(max_depth, topk, max_nodes)

    @classmethod
    def load(cls, path: PathArg, max_depth: Optional[int] = None, topk: Optional[int] = None,
             max_nodes: Optional[int] = None) -> "Bank":
        """Read a bank file (JSON, docs/bank-format.md)."""
        out = ffi.new("entmtp_bank **")
        check(lib.entmtp_bank_load(fspath(path), _params(max_depth, topk, max_nodes), out))
        return cls(_ptr=out[0])

    def save(self, path: PathArg) -> None:
        check(lib.entmtp_bank_save(self._ptr, fspath(path)))

    builtin_names = staticmethod(builtin_tree_names)

    def add_tree(self, name: str, choices: Iterable[Sequence[int]]) -> int:
        """Compile a tree from Medusa choices (a list of paths, each a list of
        ranks; [] is the root-only tree) and append it. Returns its index.
        Invalid choices raise InvalidTreeError naming the offending path."""
        ranks: List[int] = []
        lengths: List[int] = []
        for i, path in enumerate(choices):
            if isinstance(path, (str, bytes)) or not hasattr(path, "__iter__"):
                raise InvalidTreeError(lib.ENTMTP_ERR_INVALID_TREE,
                                       "tree '%s': path %d (%r) is not a list of ranks" % (name, i, path))
            n = 0
            for r in path:
                rank: Optional[int]
                try:
                    rank = operator.index(r)
                except TypeError:
                    rank = None
                if rank is None or not INT32_MIN <= rank <= INT32_MAX:
                    raise InvalidTreeError(lib.ENTMTP_ERR_INVALID_TREE,
                                           "tree '%s': path %d: rank %r is not an int32 integer"
                                           % (name, i, r))
                ranks.append(rank)
                n += 1
            lengths.append(n)
        c_ranks = ffi.new("int32_t[]", ranks)
        c_lengths = ffi.new("int32_t[]", lengths)
        out = ffi.new("int32_t *")
        check(lib.entmtp_bank_add_tree(self._ptr, text(name), c_ranks, c_lengths, len(lengths), out))
        return out[0]

    def add_tree_json(self, name: str, choices_json: str) -> int:
        """Same with choices as JSON text, e.g. "[[0],[0,0],[1]]"."""
        out = ffi.new("int32_t *")
        check(lib.entmtp_bank_add_tree_json(self._ptr, text(name), text(choices_json), out))
        return out[0]

    def add_builtin(self, builtin_name: str) -> int:
        """Append a built-in tree (see Bank.builtin_names()). Returns its index."""
        out = ffi.new("int32_t *")
        check(lib.entmtp_bank_add_builtin(self._ptr, text(builtin_name), out))
        return out[0]

    def __len__(self) -> int:
        return int(lib.entmtp_bank_size(self._ptr))

    def find(self, name: str) -> int:
        """Index of the tree called `name` (NotFoundError if none)."""
        out = ffi.new("int32_t *")
        check(lib.entmtp_bank_find(self._ptr, text(name), out))
        return out[0]

    def get(self, name: str) -> Optional[int]:
        """Index of the tree called `name`, or None."""
        try:
            return self.find(name)
        except NotFoundError:
            lib.entmtp_clear_error()
            return None

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def _index(self, index_or_name: TreeRef) -> int:
        if isinstance(index_or_name, (str, bytes)):
            return self.find(index_or_name)
        if not isinstance(index_or_name, int) or not INT32_MIN <= index_or_name <= INT32_MAX:
            raise OutOfRangeError(lib.ENTMTP_ERR_OUT_OF_RANGE, "tree index %r" % (index_or_name,))
        return index_or_name

    def tree_info(self, index_or_name: TreeRef) -> TreeInfo:
        """TreeInfo of a tree given by index or name."""
        k = self._index(index_or_name)
        p = new_struct("entmtp_tree_info")
        check(lib.entmtp_bank_tree_info(self._ptr, k, p))
        return TreeInfo(index=k, name=cstr(p.name), n_nodes=p.n_nodes, depth=p.depth,
                        n_paths=p.n_paths, n_leaves=p.n_leaves,
                        mean_accept_length=p.mean_accept_length, tokens_per_second=p.tokens_per_second)

    def __iter__(self) -> Iterator[TreeInfo]:
        for k in range(len(self)):
            yield self.tree_info(k)

    def names(self) -> List[str]:
        """Tree names in index order."""
        return [t.name for t in self]

    def set_figures(self, index_or_name: TreeRef, mean_accept_length: float, tokens_per_second: float) -> None:
        """Record measured figures for a tree (kept by save())."""
        check(lib.entmtp_bank_set_figures(self._ptr, self._index(index_or_name),
                                          mean_accept_length, tokens_per_second))

    def tree_buffers(self, index_or_name: TreeRef) -> TreeBuffers:
        """TreeBuffers of a tree (copied out of the bank)."""
        p = new_struct("entmtp_tree_buffers")
        check(lib.entmtp_bank_tree_buffers(self._ptr, self._index(index_or_name), p))
        n, d, leaves = p.n_nodes, p.depth, p.n_leaves
        return TreeBuffers(
            n_nodes=n, depth=d, topk=p.topk, n_leaves=leaves,
            attn_mask=copy_array(p.attn_mask, n * n, (n, n), "uint8"),
            tree_indices=copy_array(p.tree_indices, n),
            position_ids=copy_array(p.position_ids, n),
            retrieve_indices=copy_array(p.retrieve_indices, leaves * (d + 1), (leaves, d + 1)),
            parents=copy_array(p.parents, n),
            node_ranks=copy_array(p.node_ranks, n))

    def set_policy_config(self, policy: "Policy") -> None:
        """Store a (non-custom) Policy's settings in the bank; save() writes them."""
        from .policy import Policy
        if not isinstance(policy, Policy):
            raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT,
                                       "set_policy_config: expected an entmtp.Policy")
        cfg, _keep = policy._c_config()
        check(lib.entmtp_bank_set_policy_config(self._ptr, cfg))

    def default_policy(self) -> Optional["PolicyKind"]:
        """The policy kind the bank names as its default (entmtp_bank_default_policy:
        "policy.default" of a bank file, else the first kind stored), the one its
        search calibrated best; None when the bank holds no policy settings."""
        from .enums import PolicyKind
        out = ffi.new("entmtp_policy_kind *")
        st = lib.entmtp_bank_default_policy(self._ptr, out)
        if st == lib.ENTMTP_ERR_NOT_FOUND:
            lib.entmtp_clear_error()
            return None
        check(st)
        return PolicyKind(out[0])

    def policy(self, kind: Union["PolicyKind", str, int]) -> "Policy":
        """A new Policy from the settings of `kind` stored in the bank
        (NotFoundError when the bank holds none)."""
        from .policy import Policy
        return Policy.from_bank(self, kind)

    def __repr__(self) -> str:
        if self.closed:
            return "<entmtp.Bank closed>"
        return "<entmtp.Bank %s>" % self.names()
