"""Tree-scheduling policies: static, ladder, hysteresis, UCB and custom
(a Python callable as the select callback)."""
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._ffi import ffi, lib
from ._handle import Handle
from ._callbacks import PolicyCallbacks, call_error
from ._util import default_struct, float_array, int32_array, new_struct, text
from .enums import PolicyKind, _coerce
from .errors import InvalidArgumentError, InvalidConfigError, check

if TYPE_CHECKING:
    from .bank import Bank

KindArg = Union[PolicyKind, str, int]  # a kind, its name or its number

MAX_HEADS = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_HEADS)
MAX_LADDER = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_LADDER)
MAX_TOPK = lib.entmtp_limit(lib.ENTMTP_LIMIT_MAX_TOPK)
# entmtp_features up to its last field: a struct_size this large carries them all
_FEATURES_FULL = ffi.offsetof("entmtp_features", "expected_seconds") + ffi.sizeof("double *")


@dataclasses.dataclass
class Features:
    """entmtp_features: what a policy sees at each step. n_heads is
    len(head_p); head_p and g hold at most entmtp_limit(ENTMTP_LIMIT_MAX_HEADS)
    values.

    head_topk_p[d][r] is head d's rank-r probability (ranks in descending
    order, topk of them; head_topk_p[d][0] == head_p[d]). expected_accept[k]
    and expected_seconds[k] are the tokens a step with bank tree k is
    expected to emit and the seconds it is expected to take; a session shows
    them to custom (and the throughput and dynamic) policies and leaves them
    None otherwise. n_trees is the bank's tree count (0 outside a session
    unless the outlook is given)."""
    s: float = 0.0
    p0: float = 0.0
    head_p: List[float] = dataclasses.field(default_factory=list)
    g: List[float] = dataclasses.field(default_factory=list)
    entropy: float = 0.0
    last_accept_length: int = 0
    accept_length_ema: float = 0.0
    step: int = 0
    head_topk_p: List[List[float]] = dataclasses.field(default_factory=list)
    n_trees: int = 0
    expected_accept: Optional[List[float]] = None
    expected_seconds: Optional[List[float]] = None

    @property
    def n_heads(self) -> int:
        return len(self.head_p)

    @property
    def topk(self) -> int:
        """Ranks per head in head_topk_p (0 without them)."""
        return len(self.head_topk_p[0]) if self.head_topk_p else 0

    @classmethod
    def _from_c(cls, f: Any) -> "Features":
        n = max(0, min(f.n_heads, MAX_HEADS))
        head_p = list(ffi.unpack(f.head_p, n)) if n and f.head_p != ffi.NULL else []
        g = list(ffi.unpack(f.g, n)) if n and f.g != ffi.NULL else []
        out = cls(s=f.s, p0=f.p0, head_p=head_p, g=g, entropy=f.entropy,
                  last_accept_length=f.last_accept_length, accept_length_ema=f.accept_length_ema,
                  step=f.step)
        # the appended fields, when the library that filled the struct has them
        if f.struct_size >= _FEATURES_FULL:
            k = max(0, min(f.topk, MAX_TOPK))
            if n and k and f.head_topk_p != ffi.NULL:
                flat = ffi.unpack(f.head_topk_p, n * k)
                out.head_topk_p = [list(flat[d * k:(d + 1) * k]) for d in range(n)]
            out.n_trees = max(0, f.n_trees)
            if out.n_trees and f.expected_accept != ffi.NULL and f.expected_seconds != ffi.NULL:
                out.expected_accept = list(ffi.unpack(f.expected_accept, out.n_trees))
                out.expected_seconds = list(ffi.unpack(f.expected_seconds, out.n_trees))
        return out

    def _to_c(self) -> Tuple[Any, Any]:
        """(cdata entmtp_features *, keepalive): the struct points into the
        arrays held by keepalive."""
        def bad(msg: str) -> InvalidArgumentError:
            return InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT, "features: " + msg)
        if len(self.head_p) > MAX_HEADS or len(self.g) != len(self.head_p):
            raise bad("head_p and g need the same length, at most %d" % MAX_HEADS)
        rows = [list(r) for r in self.head_topk_p]
        k = len(rows[0]) if rows else 0
        if rows and (len(rows) != len(self.head_p) or any(len(r) != k for r in rows) or not 1 <= k <= MAX_TOPK):
            raise bad("head_topk_p needs one row per head (%d), each of the same length 1..%d"
                      % (len(self.head_p), MAX_TOPK))
        if (self.expected_accept is None) != (self.expected_seconds is None):
            raise bad("expected_accept and expected_seconds go together (both or neither)")
        n_trees = self.n_trees
        if self.expected_accept is not None:
            m = len(self.expected_accept)
            if len(self.expected_seconds) != m or n_trees not in (0, m):
                raise bad("expected_accept (%d), expected_seconds (%d) and n_trees (%d) need the same count"
                          % (m, len(self.expected_seconds), n_trees))
            n_trees = m
        f = new_struct("entmtp_features")
        f.s, f.p0, f.entropy = self.s, self.p0, self.entropy
        head_p, n = float_array(self.head_p)
        g, _ = float_array(self.g)
        f.n_heads = n
        f.head_p = head_p
        f.g = g
        f.last_accept_length = self.last_accept_length
        f.accept_length_ema = self.accept_length_ema
        f.step = self.step
        topk_p, _ = float_array([p for r in rows for p in r])
        f.topk = k
        f.head_topk_p = topk_p
        f.n_trees = n_trees
        keep = [head_p, g, topk_p]
        if self.expected_accept is not None:
            acc, _ = float_array(self.expected_accept)
            sec = ffi.new("double[]", [float(v) for v in self.expected_seconds]) if n_trees else ffi.NULL
            f.expected_accept, f.expected_seconds = acc, sec
            keep += [acc, sec]
        return f, keep


@dataclasses.dataclass
class Outcome:
    """entmtp_outcome: what a step produced, shown to observe()."""
    tree_index: int
    accept_length: int
    n_nodes: int = 0
    draft_length: int = 0
    seconds: float = 0.0

    @classmethod
    def _from_c(cls, o: Any) -> "Outcome":
        return cls(tree_index=o.tree_index, accept_length=o.accept_length, n_nodes=o.n_nodes,
                   draft_length=o.draft_length, seconds=o.seconds)

    def _to_c(self) -> Any:
        o = new_struct("entmtp_outcome")
        o.tree_index, o.n_nodes, o.draft_length = self.tree_index, self.n_nodes, self.draft_length
        o.accept_length, o.seconds = self.accept_length, self.seconds
        return o


def kind_from_name(name: str) -> PolicyKind:
    """PolicyKind for "static", "ladder", "hysteresis", "ucb", "custom",
    "throughput" or "dynamic"."""
    out = ffi.new("entmtp_policy_kind *")
    check(lib.entmtp_policy_kind_from_name(text(name), out))
    return PolicyKind(out[0])


def kind_name(kind: Union[PolicyKind, int]) -> Optional[str]:
    p = lib.entmtp_policy_kind_name(int(kind))
    return ffi.string(p).decode() if p != ffi.NULL else None


def _config_dict(c: Any) -> Dict[str, Any]:
    """The settings of a policy config's kind as a dict (arrays copied)."""
    k = PolicyKind(c.kind)
    if k == PolicyKind.STATIC:
        return {"kind": "static", "static_tree": c.static_tree}
    if k == PolicyKind.LADDER:
        n = c.n_thresholds
        thresholds = list(ffi.unpack(c.thresholds, n)) if n and c.thresholds != ffi.NULL else []
        trees = (list(ffi.unpack(c.ladder_trees, n + 1)) if c.ladder_trees != ffi.NULL
                 else list(range(n + 1)))
        return {"kind": "ladder", "thresholds": thresholds, "ladder_trees": trees}
    if k == PolicyKind.HYSTERESIS:
        return {"kind": "hysteresis", "tau_on": c.tau_on, "tau_off": c.tau_off,
                "conservative_tree": c.conservative_tree, "aggressive_tree": c.aggressive_tree}
    if k == PolicyKind.UCB:
        return {"kind": "ucb", "ucb_exploration": c.ucb_exploration,
                "ucb_length_penalty": c.ucb_length_penalty}
    return {"kind": "custom"}


def _config_to_c(d: Dict[str, Any]) -> Tuple[Any, List[Any]]:
    """(cdata entmtp_policy_config *, keepalive) from a _config_dict (not custom)."""
    kind = PolicyKind[d["kind"].upper()]
    cfg = default_struct("entmtp_policy_config", lib.entmtp_policy_config_init, kind)
    keep: List[Any] = []
    for name, value in d.items():
        if name == "thresholds":
            arr, cfg.n_thresholds = float_array(value)
            cfg.thresholds = arr
            keep.append(arr)
        elif name == "ladder_trees":
            arr, _n, _keep = int32_array(value, "ladder_trees")
            cfg.ladder_trees = arr
            keep.append(arr)
        elif name != "kind":
            setattr(cfg, name, value)
    return cfg, keep


class Policy(Handle):
    """A tree-scheduling policy. Build one with the class methods static(),
    ladder(), hysteresis(), ucb(), custom() or from_bank(); or generically
    with Policy(kind, **fields) where fields are entmtp_policy_config fields
    (thresholds and ladder_trees as lists). A policy is attached to a session
    with Session.set_policy(); closing it detaches it first."""

    def __init__(self, kind: KindArg, **fields: Any) -> None:
        kind = _coerce(PolicyKind, kind, "policy kind")
        cfg = default_struct("entmtp_policy_config", lib.entmtp_policy_config_init, kind)
        keep: List[Any] = []  # arrays cfg points into: alive until entmtp_policy_create copied them
        self._callbacks: Optional[PolicyCallbacks] = None
        self._cb_handle: Any = None
        if kind == PolicyKind.CUSTOM:
            select = fields.pop("select", None)
            observe = fields.pop("observe", None)
            reset = fields.pop("reset", None)
            if select is not None:
                for nm, fn in (("select", select), ("observe", observe), ("reset", reset)):
                    if fn is not None and not callable(fn):
                        raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                                 "custom: %s is not callable" % nm)
                self._callbacks = PolicyCallbacks(select, observe, reset)
                self._cb_handle = ffi.new_handle(self._callbacks)
                cfg.select = lib._entmtp_py_select
                cfg.observe = lib._entmtp_py_observe if observe is not None else ffi.NULL
                cfg.reset = lib._entmtp_py_reset if reset is not None else ffi.NULL
                cfg.user_data = self._cb_handle
        thresholds = fields.pop("thresholds", None)
        if thresholds is not None:
            thresholds = list(thresholds)
            if len(thresholds) > MAX_LADDER - 1:
                raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                         "ladder: %d thresholds; at most %d (entmtp_limit(ENTMTP_LIMIT_MAX_LADDER) - 1)"
                                         % (len(thresholds), MAX_LADDER - 1))
            arr, n = float_array(thresholds)
            keep.append(arr)
            cfg.n_thresholds = n
            cfg.thresholds = arr
        trees = fields.pop("ladder_trees", None)
        if trees is not None:
            trees = list(trees)
            if len(trees) > MAX_LADDER:
                raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                         "ladder: %d trees; at most %d (entmtp_limit(ENTMTP_LIMIT_MAX_LADDER))"
                                         % (len(trees), MAX_LADDER))
            if len(trees) != cfg.n_thresholds + 1:
                raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                         "ladder: %d thresholds need %d trees, got %d"
                                         % (cfg.n_thresholds, cfg.n_thresholds + 1, len(trees)))
            arr, _n, _keep = int32_array(trees, "ladder_trees")
            keep.append(arr)
            cfg.ladder_trees = arr
        for name, value in fields.items():
            if name in ("struct_size", "kind", "select", "observe", "reset", "user_data", "n_thresholds",
                        "thresholds", "ladder_trees") \
                    or not hasattr(cfg, name):
                raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                         "%s policy: unknown or read-only field '%s'" % (kind.name.lower(), name))
            setattr(cfg, name, value)
        self._create(cfg)

    def _create(self, cfg: Any) -> None:
        out = ffi.new("entmtp_policy **")
        check(lib.entmtp_policy_create(cfg, out))
        self._config = _config_dict(cfg)  # read now: cfg's arrays are not ours to keep
        self._own(out[0], lib.entmtp_policy_free)

    # -- constructors
    @classmethod
    def static(cls, tree: int = 0) -> "Policy":
        """Always tree `tree`."""
        return cls(PolicyKind.STATIC, static_tree=tree)

    @classmethod
    def ladder(cls, thresholds: Sequence[float], trees: Optional[Sequence[int]] = None) -> "Policy":
        """K-1 strictly ascending thresholds on s pick one of K trees: bin b =
        number of thresholds t with s > t; tree = trees[b] (default: b)."""
        kw: Dict[str, Any] = {"thresholds": thresholds}
        if trees is not None:
            kw["ladder_trees"] = trees
        return cls(PolicyKind.LADDER, **kw)

    @classmethod
    def hysteresis(cls, tau_on: float, tau_off: float, conservative: int = 0, aggressive: int = 1) -> "Policy":
        """EntMTP-tau: aggressive tree when s > tau_on, back to the
        conservative tree when s <= tau_off (tau_off <= tau_on)."""
        return cls(PolicyKind.HYSTERESIS, tau_on=tau_on, tau_off=tau_off,
                   conservative_tree=conservative, aggressive_tree=aggressive)

    @classmethod
    def ucb(cls, exploration: float = 1.0, length_penalty: float = 0.0) -> "Policy":
        """UCB1 bandit over the whole bank."""
        return cls(PolicyKind.UCB, ucb_exploration=exploration, ucb_length_penalty=length_penalty)

    @classmethod
    def custom(cls, select: Callable[["Features", int], int], observe: Optional[Callable[["Outcome"], Any]] = None,
               reset: Optional[Callable[[], Any]] = None) -> "Policy":
        """A policy implemented in Python: select(features: Features, n_trees)
        -> tree index; observe(outcome: Outcome) and reset() are optional.
        An exception in a callback fails the step (ENTMTP_ERR_CALLBACK) and is
        re-raised as the __cause__ of a CallbackError."""
        return cls(PolicyKind.CUSTOM, select=select, observe=observe, reset=reset)

    @classmethod
    def from_bank(cls, bank: "Bank", kind: KindArg) -> "Policy":
        """The settings of policy `kind` stored in a bank file."""
        kind = _coerce(PolicyKind, kind, "policy kind")
        cfg = new_struct("entmtp_policy_config")
        check(lib.entmtp_bank_policy_config(bank._ptr, kind, cfg))
        self = cls.__new__(cls)
        self._callbacks = None
        self._cb_handle = None
        self._create(cfg)
        return self

    # -- properties
    @property
    def kind(self) -> PolicyKind:
        return PolicyKind(lib.entmtp_policy_get_kind(self._ptr))

    @property
    def kind_name(self) -> Optional[str]:
        return kind_name(self.kind)

    @property
    def config(self) -> Dict[str, Any]:
        """The settings of this policy's kind, as a dict."""
        return dict(self._config)

    def _c_config(self) -> Tuple[Any, List[Any]]:
        """(cdata entmtp_policy_config *, keepalive) of this policy's settings."""
        return _config_to_c(self._config)

    # -- operations
    def _raise(self, st: int, what: str) -> None:
        err = call_error(self._callbacks, st, what)
        if err is not None:
            raise err

    def validate(self, n_trees: int) -> None:
        """Check every tree index the policy can return against a bank of n_trees."""
        check(lib.entmtp_policy_validate(self._ptr, n_trees))

    def select(self, features: Union["Features", float], n_trees: int) -> int:
        """The tree for the next step. `features` is a Features, or a float
        taken as s (the other features zero)."""
        if not isinstance(features, Features):
            if isinstance(features, (int, float)) and not isinstance(features, bool):
                features = Features(s=float(features))
            else:
                raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT,
                                           "select: features must be a Features or a float s")
        f, _keep = features._to_c()
        out = ffi.new("int32_t *")
        st = lib.entmtp_policy_select(self._ptr, f, n_trees, out)
        self._raise(st, "the custom policy's select callback")
        return out[0]

    def observe(self, outcome: Optional["Outcome"] = None, **kw: Any) -> None:
        """Report a step's outcome (an Outcome, or its fields as keywords)."""
        if outcome is None:
            outcome = Outcome(**kw)
        st = lib.entmtp_policy_observe(self._ptr, outcome._to_c())
        self._raise(st, "the custom policy's observe callback")

    def reset(self) -> None:
        lib.entmtp_policy_reset(self._ptr)
        self._raise(lib.ENTMTP_OK, "the custom policy's reset callback")

    def __repr__(self) -> str:
        if self.closed:
            return "<entmtp.Policy closed>"
        return "<entmtp.Policy %s>" % self.config
