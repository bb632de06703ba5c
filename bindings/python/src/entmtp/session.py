"""Decoding sessions."""
import dataclasses
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from ._ffi import ffi, lib
from ._handle import Handle, _Attachment
from ._callbacks import TokenCallbacks, call_error
from ._util import copy_array, default_struct, int32_array, new_struct
from .bank import Bank
from .errors import InvalidArgumentError, InvalidConfigError, OutOfRangeError, UnsupportedError, check
from .model import Heads, Model
from .policy import Features, Policy


@dataclasses.dataclass(frozen=True)
class StepResult:
    """entmtp_step_result, with the emitted tokens copied into a list."""
    tokens: List[int]
    tree_index: int      # -1 for a plain autoregressive step
    n_nodes: int
    accept_length: int
    s: float
    p0: float
    entropy: float
    seconds: float
    stopped: bool

    @property
    def n_tokens(self):
        return len(self.tokens)


@dataclasses.dataclass(frozen=True)
class SessionStats:
    """What a session did since it was created or reset (entmtp_session_stats).

    Counts: `n_prompt_tokens` prefilled, `n_generated` tokens emitted by
    `n_steps` steps, so `mean_accept_length` = n_generated / n_steps (>= 1
    once a step ran). Times are wall seconds: `prefill_seconds` (at
    `prefill_tokens_per_second`) and `decode_seconds`, the steps' sum, whose
    rate is `tokens_per_second`.

    One-time costs: the first step with each tree (and the first AR step;
    with CUDA step graphs the first two, which run directly and then capture)
    are warm-up steps: `n_warmup_steps` of them took `warmup_seconds`. The
    decode rate without them is `warm_tokens_per_second` (over the
    `n_warm_generated` tokens of the other steps; 0 before a warm step).

    What speculation bought: `speedup` is the warm rate over plain AR's on
    the same model, `ar_tokens_per_second` that AR rate, and
    `speedup_source` says where it comes from: "estimated" (the bank's
    per-tree step costs: a step with tree k costs as many AR steps as its
    bank figures say, speedup = tokens / the steps' summed cost), "measured"
    (Session.measure_ar ran AR on the same prompt) or "none" (an AR session,
    a bank without figures, no steps yet; speedup 0).
    """
    n_prompt_tokens: int
    n_generated: int
    n_steps: int
    mean_accept_length: float
    prefill_seconds: float
    decode_seconds: float
    tokens_per_second: float
    prefill_tokens_per_second: float = 0.0
    n_warmup_steps: int = 0
    warmup_seconds: float = 0.0
    n_warm_generated: int = 0
    warm_tokens_per_second: float = 0.0
    speedup: float = 0.0
    ar_tokens_per_second: float = 0.0
    speedup_source: str = "none"  # "none", "estimated" or "measured"


_SPEEDUP_SOURCES = {0: "none", 1: "estimated", 2: "measured"}


class Session(Handle):
    """A decoding session over a model, optionally with heads and a bank
    (without both, every step is plain autoregressive).

    The session keeps its Model, Heads, Bank and Policy alive; closing any of
    the first three closes the session, closing the policy detaches it.
    Keyword settings left as None keep the library defaults
    (entmtp_session_default_params): kv_capacity 0 = min(4096, context),
    temperature 0 = greedy (lossless), stop_tokens None = the model's
    end-of-generation tokens, [] = none. reproducible=True keeps the bank's
    step costs instead of learning them from the clock, so a sampled run
    with the same seed repeats exactly under every policy.
    prompt_activation_bits: 8 (the library's default) prefills prompts with
    8-bit activations (about 2x faster prompt processing than 16 with
    AVX-512 VNNI, 1.3x with AVX2; some fidelity lost; steps keep their own
    precision; docs/performance.md), 16 keeps the 16-bit activations
    (greedy text equal to a float64 reference in our checks).
    step_activation_bits=8 runs every step (AR and tree verify) with 8-bit
    activations, llama.cpp's precision (faster steps with AVX-512 VNNI, some
    fidelity lost; greedy output still equals greedy AR at the same setting).
    kv_type="bf16" stores the KV cache in BF16 (K/V rounded to nearest even:
    half the cache's memory; greedy output still equals greedy AR at the
    same setting), "f32" in F32; None keeps the backend's default (F32 on
    the CPU, BF16 on CUDA).
    """

    def __init__(self, model, heads=None, bank=None, *, kv_capacity=None, temperature=None,
                 epsilon=None, delta=None, seed=None, ema_decay=None, stop_tokens=None, reproducible=None,
                 prompt_activation_bits=None, step_activation_bits=None, kv_type=None):
        if not isinstance(model, Model):
            raise TypeError("Session: model must be an entmtp.Model")
        if heads is not None and not isinstance(heads, Heads):
            raise TypeError("Session: heads must be an entmtp.Heads or None")
        if bank is not None and not isinstance(bank, Bank):
            raise TypeError("Session: bank must be an entmtp.Bank or None")
        p = default_struct("entmtp_session_params", lib.entmtp_session_params_init)
        for name, value in (("kv_capacity", kv_capacity), ("temperature", temperature),
                            ("epsilon", epsilon), ("delta", delta), ("seed", seed),
                            ("ema_decay", ema_decay), ("prompt_activation_bits", prompt_activation_bits),
                            ("step_activation_bits", step_activation_bits)):
            if value is not None:
                setattr(p, name, value)
        if reproducible is not None:
            p.reproducible = 1 if reproducible else 0
        if kv_type is not None:
            # the C enum by name; an int goes to the library, which checks it and names the field
            kv_types = {"f32": lib.ENTMTP_KV_F32, "bf16": lib.ENTMTP_KV_BF16}
            if isinstance(kv_type, str) and kv_type not in kv_types:
                raise InvalidConfigError(lib.ENTMTP_ERR_INVALID_CONFIG,
                                         f"Session: kv_type = {kv_type!r} must be 'f32' or 'bf16'")
            p.kv_type = kv_types[kv_type] if isinstance(kv_type, str) else kv_type
        if stop_tokens is not None:
            # the library copies the ids and checks their count against
            # entmtp_limit(ENTMTP_LIMIT_MAX_STOP_TOKENS)
            stop_arr, n_stop, _keep = int32_array(stop_tokens, "stop_tokens")
            p.n_stop_tokens = n_stop
            p.stop_tokens = stop_arr
        out = ffi.new("entmtp_session **")
        check(lib.entmtp_session_create(model._ptr, heads._ptr if heads is not None else ffi.NULL,
                                        bank._ptr if bank is not None else ffi.NULL, p, out))
        self._own(out[0], lib.entmtp_session_free, parents=(model, heads, bank))
        self.model, self.heads, self.bank = model, heads, bank
        # set by Session.for_model: the drafter chosen and why
        self.drafter, self.heads_reason, self.bank_reason = None, "", ""
        self._policy = None
        self._attachment = None

    @classmethod
    def create(cls, model, heads=None, bank=None, **params):
        return cls(model, heads, bank, **params)

    @classmethod
    def for_model(cls, model, *, heads=None, bank=None, policy=None, search_path=None, **params) -> "Session":
        """The session `entmtp generate` decodes with: the drafter shipped for
        `model` (Model.find_drafter: matched by identity, never by file name)
        or the `heads` path given; the bank given, else the one shipped with
        the heads, else the heads' default built-in trees; the `policy` kind
        named (a name, PolicyKind or Policy), else the bank's default policy
        with its stored settings. Without matching heads it decodes plain AR.
        `params` are Session's keyword settings.

        The choice and its reasons are kept: `drafter` (a Drafter, or None),
        `heads_reason` ("given by heads=", "matched by identity (...)", or why
        none matched) and `bank_reason`."""
        from .drafter import find_drafter
        from .errors import NotFoundError
        drafter = None
        if heads is None:
            try:
                drafter = find_drafter(model, search_path)
                heads_path, heads_reason = drafter.heads_path, drafter.reason
            except NotFoundError as e:
                heads_path, heads_reason = None, e.reason
        else:
            heads_path, heads_reason = heads, "given by heads="
        loaded = bnk = pol = None
        bank_reason = ""
        try:
            if heads_path is not None:
                loaded = model.load_heads(heads_path)
                if bank is not None:
                    bnk, bank_reason = Bank.load(bank, max_depth=loaded.n_heads), "given by bank="
                elif drafter is not None and drafter.bank_path:
                    bnk, bank_reason = Bank.load(drafter.bank_path, max_depth=loaded.n_heads), "shipped with the heads"
                else:
                    from .enums import HeadsKind
                    name = "hydra_default" if loaded.info.kind == HeadsKind.HYDRA else "medusa_vicuna_7b_stage2"
                    bnk = Bank(max_depth=loaded.n_heads)
                    bnk.add_builtin(name)
                    bank_reason = "built-in trees %s (no bank file for these heads)" % name
                pol = _policy_for(bnk, policy)
            session = cls(model, loaded, bnk, **params)
            if pol is not None:
                session.set_policy(pol)
        except BaseException:
            for h in (pol, bnk, loaded):
                if h is not None:
                    h.close()
            raise
        session.drafter = drafter
        session.heads_reason = heads_reason
        session.bank_reason = bank_reason
        return session

    # -- policy
    @property
    def policy(self):
        """The attached Policy (None: the default static policy on tree 0)."""
        if self._policy is not None and (self._policy.closed or self._attachment.ptr is None):
            self._policy = self._attachment = None
        return self._policy

    def set_policy(self, policy: Optional[Policy]) -> None:
        """Attach a Policy (validated against the bank, and reset), or None
        for the default static policy on tree 0."""
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError("set_policy: expected an entmtp.Policy or None")
        ptr = self._ptr
        check(lib.entmtp_policy_set(ptr, policy._ptr if policy is not None else ffi.NULL))
        old = self._attachment
        self._policy = self._attachment = None
        if old is not None:  # already detached in C: just forget the record
            old.ptr = None
            for parent in list(old.parents):
                parent.remove_dep(old)
        if policy is not None:
            att = _Attachment(self._res)
            policy._res.add_dep(att)
            self._res.add_dep(att)
            self._policy, self._attachment = policy, att
        self._raise_policy(lib.ENTMTP_OK)

    def _policy_state(self):
        pol = self._policy
        return pol._callbacks if pol is not None and not pol.closed else None

    def _raise_policy(self, st, extra=None):
        err = call_error(self._policy_state(), st, "the custom policy callback")
        if err is not None:
            for k, v in (extra or {}).items():
                setattr(err, k, v)
            raise err

    # -- decoding
    def prefill(self, tokens: Sequence[int]) -> None:
        """Append prompt tokens (a list or 1-D integer numpy array) and run them."""
        arr, n, _keep = int32_array(tokens, "tokens")
        check(lib.entmtp_session_prefill(self._ptr, arr, n))

    @staticmethod
    def _result(r):
        return StepResult(tokens=list(ffi.unpack(r.tokens, r.n_tokens)) if r.n_tokens > 0 else [],
                          tree_index=r.tree_index, n_nodes=r.n_nodes, accept_length=r.accept_length,
                          s=r.s, p0=r.p0, entropy=r.entropy, seconds=r.seconds, stopped=bool(r.stopped))

    def step(self, max_tokens: int = 0) -> StepResult:
        """One draft-verify-accept step; at most max_tokens tokens (0: no limit).
        On KVFullError the tokens that fit were committed: the error's
        `.result` is their StepResult."""
        r = new_struct("entmtp_step_result")
        st = lib.entmtp_step(self._ptr, max_tokens, r)
        res = self._result(r)
        self._raise_policy(st, {"result": res})
        return res

    def step_ar(self) -> StepResult:
        """One plain autoregressive step (one token)."""
        r = new_struct("entmtp_step_result")
        st = lib.entmtp_step_ar(self._ptr, r)
        res = self._result(r)
        self._raise_policy(st, {"result": res})
        return res

    def generate(self, max_tokens: int, autoregressive: bool = False,
                 on_tokens: Optional[Callable[[List[int]], Any]] = None) -> List[int]:
        """Step until a stop token, max_tokens tokens, a full KV cache or
        on_tokens(batch: list[int]) returns a true value. Returns the emitted
        tokens. An error carries the tokens emitted before it as `.tokens`
        (KVFullError: the ones that fit); an exception in on_tokens stops
        generation and is re-raised as the __cause__ of a CallbackError."""
        state = TokenCallbacks(on_tokens)
        handle = ffi.new_handle(state)
        st = lib.entmtp_generate(self._ptr, max_tokens, int(bool(autoregressive)),
                                 lib._entmtp_py_tokens, handle)
        if st == lib.ENTMTP_STOPPED:  # on_tokens asked to stop: not an error
            st = lib.ENTMTP_OK
        tok_err = call_error(state, st, "on_tokens") if state.pending is not None else None
        if tok_err is not None:
            pol = self._policy_state()
            if pol is not None:
                pol.take()  # the on_tokens exception wins; drop a later policy one
            tok_err.tokens = state.tokens
            raise tok_err
        self._raise_policy(st, {"tokens": state.tokens})
        return state.tokens

    def stream(self, prompt: Union[str, Sequence[int]], max_tokens: int = 256, *, chat: Optional[bool] = None,
               system_prompt: Optional[str] = None, autoregressive: bool = False) -> Iterator[str]:
        """Prefill `prompt`, then yield the generated text one decoding step at
        a time: `for piece in session.stream("Hello"): print(piece, end="")`.

        A str prompt goes through the model's chat template when it has one
        (chat=None), always (chat=True) or never (chat=False), and is tokenized
        with the special tokens the model's tokenizer asks for (add_special);
        a list of ids is prefilled as it is. A piece never ends inside a UTF-8 character (the
        rest follows with the next step) and the stop token is not text.
        Stops at a stop token or after max_tokens tokens; leaving the loop
        early leaves the session where it stopped. Without heads and a bank,
        or with autoregressive=True, every step is plain autoregressive."""
        model = self.model
        if isinstance(prompt, str):
            text_ = prompt
            if chat is not False:
                try:
                    text_ = model.chat_prompt(prompt, system_prompt)
                except UnsupportedError:
                    if chat:
                        raise
            prompt = model.tokenize(text_, add_special=True, parse_special=True)  # the BOS the model asks for
        self.prefill(prompt)
        ar = autoregressive or self.heads is None or self.bank is None
        generated: List[int] = []
        sent = 0
        while len(generated) < max_tokens:
            r = self.step_ar() if ar else self.step(max_tokens - len(generated))
            generated.extend(r.tokens)
            done = r.stopped or len(generated) >= max_tokens
            shown = generated[:-1] if r.stopped and model.is_eog(generated[-1]) else generated
            data = model.detokenize_bytes(shown)
            end = len(data) if done else len(data) - _incomplete_utf8_tail(data)
            if end > sent:
                yield data[sent:end].decode("utf-8", "replace")
                sent = end
            if done:
                return

    # -- state
    def tokens(self) -> List[int]:
        """All tokens of the session (prompt then generated)."""
        pp = ffi.new("const int32_t **")
        n = ffi.new("int32_t *")
        check(lib.entmtp_session_tokens(self._ptr, pp, n))
        return list(ffi.unpack(pp[0], n[0])) if n[0] > 0 else []

    def __len__(self):
        pp = ffi.new("const int32_t **")
        n = ffi.new("int32_t *")
        check(lib.entmtp_session_tokens(self._ptr, pp, n))
        return n[0]

    def stats(self) -> SessionStats:
        """The session's SessionStats as of now: counts, prefill and decode
        times and rates, the warm-up steps left out of the warm decode rate,
        and the speedup over plain AR with its source (estimated from the
        bank's step costs, or measured by measure_ar())."""
        p = new_struct("entmtp_session_stats")
        check(lib.entmtp_session_get_stats(self._ptr, p))
        return SessionStats(n_prompt_tokens=p.n_prompt_tokens, n_generated=p.n_generated,
                            n_steps=p.n_steps, mean_accept_length=p.mean_accept_length,
                            prefill_seconds=p.prefill_seconds, decode_seconds=p.decode_seconds,
                            tokens_per_second=p.tokens_per_second,
                            prefill_tokens_per_second=p.prefill_tokens_per_second,
                            n_warmup_steps=p.n_warmup_steps, warmup_seconds=p.warmup_seconds,
                            n_warm_generated=p.n_warm_generated, warm_tokens_per_second=p.warm_tokens_per_second,
                            speedup=p.speedup, ar_tokens_per_second=p.ar_tokens_per_second,
                            speedup_source=_SPEEDUP_SOURCES.get(int(p.speedup_source), "none"))

    def measure_ar(self, n_tokens: int = 0) -> SessionStats:
        """Time plain AR on this session's prompt (the tokens before its first
        step) in a scratch session with the same model and settings, for
        `n_tokens` steps (0: as many as this session generated), and return
        the stats, now with speedup_source "measured". This session's tokens
        are not changed. StateError before the first step."""
        check(lib.entmtp_session_measure_ar(self._ptr, n_tokens))
        return self.stats()

    def tree_usage(self, index=None):
        """Steps that used tree `index` since the last reset; with no index, a
        list over every tree of the bank."""
        ptr = self._ptr
        if index is None:
            n = len(self.bank) if self.bank is not None else 0
            return [int(lib.entmtp_session_tree_usage(ptr, k)) for k in range(n)]
        if isinstance(index, str):
            if self.bank is None:
                raise InvalidArgumentError(lib.ENTMTP_ERR_INVALID_ARGUMENT, "the session has no bank")
            index = self.bank.find(index)
        n = int(lib.entmtp_session_tree_usage(ptr, index))
        if n < 0:
            raise OutOfRangeError(lib.ENTMTP_ERR_OUT_OF_RANGE,
                                  "tree_usage: index %d is outside the bank" % index)
        return n

    def reset(self) -> None:
        """Forget all tokens and KV; reset the attached policy and statistics."""
        lib.entmtp_session_reset(self._ptr)
        self._raise_policy(lib.ENTMTP_OK)

    def logits(self):
        """Base-model logits for the next token (a float32 numpy array, or a
        list without numpy). Experimental in the C API."""
        pp = ffi.new("const float **")
        n = ffi.new("int32_t *")
        check(lib.entmtp_session_logits(self._ptr, pp, n))
        return copy_array(pp[0], n[0], dtype="float32")

    def features(self):
        """The Features the policy saw at the last step. Experimental."""
        f = new_struct("entmtp_features")
        check(lib.entmtp_session_features(self._ptr, f))
        return Features._from_c(f)

    def __repr__(self):
        if self.closed:
            return "<entmtp.Session closed>"
        return "<entmtp.Session %d tokens, %s>" % (
            len(self), "speculative" if self.heads is not None and self.bank is not None else "autoregressive")


def _policy_for(bank, policy):
    """The Policy the CLI would attach: `policy` itself, or kind `policy`
    (default: the bank's default kind) with the bank's settings for it where
    it has them; None (the static policy on tree 0) when nothing names one."""
    from .enums import PolicyKind, _coerce
    if isinstance(policy, Policy):
        return policy
    kind = bank.default_policy() if policy is None else _coerce(PolicyKind, policy, "policy")
    if kind is None:
        return None
    from .errors import NotFoundError
    try:
        return Policy.from_bank(bank, kind)
    except NotFoundError:
        lib.entmtp_clear_error()
        return Policy(kind)


def _incomplete_utf8_tail(data: bytes) -> int:
    """Bytes at the end of `data` that begin a UTF-8 character not complete yet."""
    for k in range(1, min(4, len(data)) + 1):
        c = data[-k]
        if c & 0xC0 == 0x80:
            continue  # a continuation byte: look further back
        want = 4 if c >= 0xF0 else 3 if c >= 0xE0 else 2 if c >= 0xC0 else 1
        return k if want > k else 0
    return 0
