"""Model and Heads."""
import dataclasses
import os
from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence, Tuple, Union

from ._ffi import ffi, lib
from ._handle import Handle
from ._callbacks import ProgressCallbacks, call_error
from ._util import default_struct, fspath, int32_array, new_struct, text
from .enums import Backend, Compute, HeadsKind, _coerce
from .errors import BufferTooSmallError, check, make_error

if TYPE_CHECKING:
    from .drafter import Drafter


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """entmtp_model_info."""
    architecture: str
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    context_length: int
    rope_theta: float
    rms_norm_eps: float
    tied_embeddings: bool
    bos_token: int  # -1 if none
    eos_token: int  # -1 if none
    n_params: int
    backend: Backend
    #: wall time of the load, seconds (mapping, conversion, tokenizer)
    load_seconds: float = 0.0
    #: 64-bit FNV-1a of the token texts in id order (0 without a tokenizer):
    #: what shipped heads record to be matched to a model (find_drafter)
    vocab_hash: int = 0


@dataclasses.dataclass(frozen=True)
class HeadsInfo:
    """entmtp_heads_info."""
    kind: HeadsKind
    n_heads: int
    n_layers: int
    shares_lm_head: bool


class Model(Handle):
    """A loaded Llama-family model (GGUF file or Hugging Face directory).

    `backend` is "auto", "cpu", "cuda" (or a Backend); `threads` 0 uses all
    online cores. `compute` is "native" (weights in their stored type, the
    default) or "f32" (every weight converted to F32). `progress(fraction,
    what)` is called during loading; a true
    return value cancels it (CallbackError), and so does an exception, which
    becomes the CallbackError's __cause__.
    """

    def __init__(self, path, backend="auto", threads=0, device=0, progress=None, compute="native"):
        params = default_struct("entmtp_model_params", lib.entmtp_model_params_init)
        params.backend = _coerce(Backend, backend, "backend")
        params.n_threads = threads
        params.device = device
        params.compute_type = _coerce(Compute, compute, "compute")
        state = handle = None
        if progress is not None:
            state = ProgressCallbacks(progress)
            handle = ffi.new_handle(state)
            params.progress = lib._entmtp_py_progress
            params.progress_user_data = handle
        out = ffi.new("entmtp_model **")
        st = lib.entmtp_model_load(fspath(path), params, out)
        err = call_error(state, st, "the progress callback")
        del handle
        if err is not None:
            raise err
        self._own(out[0], lib.entmtp_model_free)
        self.path = path
        self._info = None

    @classmethod
    def load(cls, path, backend="auto", threads=0, device=0, progress=None):
        """Same as Model(path, ...)."""
        return cls(path, backend=backend, threads=threads, device=device, progress=progress)

    @property
    def info(self):
        """ModelInfo (read once)."""
        ptr = self._ptr  # StateError once closed
        if self._info is None:
            p = new_struct("entmtp_model_info")
            check(lib.entmtp_model_get_info(ptr, p))
            self._info = ModelInfo(
                architecture=ffi.string(p.architecture).decode("utf-8", "replace"),
                name=ffi.string(p.name).decode("utf-8", "replace"),
                vocab_size=p.vocab_size, hidden_size=p.hidden_size,
                intermediate_size=p.intermediate_size, n_layers=p.n_layers, n_heads=p.n_heads,
                n_kv_heads=p.n_kv_heads, head_dim=p.head_dim, context_length=p.context_length,
                rope_theta=p.rope_theta, rms_norm_eps=p.rms_norm_eps,
                tied_embeddings=bool(p.tied_embeddings), bos_token=p.bos_token,
                eos_token=p.eos_token, n_params=p.n_params, backend=Backend(p.backend),
                load_seconds=p.load_seconds, vocab_hash=int(p.vocab_hash))
        return self._info

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size

    def tokenize(self, text_: Union[str, bytes], add_bos: bool = False, parse_special: bool = False,
                 add_special: bool = False) -> List[int]:
        """Text (str or UTF-8 bytes) -> list of token ids.

        add_special=True adds what the model's tokenizer config asks for (a
        BOS when it sets add_bos_token, an EOS when add_eos_token), as
        llama.cpp's add_special does: use it for prompts (with
        parse_special=True for chat text from chat_prompt, which leaves the
        BOS to this call). add_bos=True puts a BOS first whatever the config
        says; give one of the two. With neither, only the text's tokens."""
        if add_special and add_bos:
            raise ValueError("tokenize: give add_special or add_bos, not both")
        mode = (lib.ENTMTP_TOKENIZE_ADD_SPECIAL if add_special
                else lib.ENTMTP_TOKENIZE_FORCE_BOS if add_bos else lib.ENTMTP_TOKENIZE_NO_SPECIAL)
        data = text(text_)
        cap = len(data) + 8
        n = ffi.new("int32_t *")
        for _ in range(2):
            buf = ffi.new("int32_t[]", cap)
            st = lib.entmtp_tokenize(self._ptr, data, len(data), mode,
                                     int(bool(parse_special)), buf, cap, n)
            if st == lib.ENTMTP_ERR_BUFFER_TOO_SMALL and n[0] > cap:
                cap = n[0]
                continue
            check(st)
            return list(ffi.unpack(buf, n[0]))
        raise BufferTooSmallError(lib.ENTMTP_ERR_BUFFER_TOO_SMALL, "entmtp_tokenize: size kept growing")

    def _text_call(self, fn, *args):
        cap = 256
        n = ffi.new("size_t *")
        for _ in range(2):
            buf = ffi.new("char[]", cap)
            st = fn(*args, buf, cap, n)
            if st == lib.ENTMTP_ERR_BUFFER_TOO_SMALL and n[0] + 1 > cap:
                cap = n[0] + 1
                continue
            check(st)
            return ffi.buffer(buf, n[0])[:]
        raise make_error(lib.ENTMTP_ERR_BUFFER_TOO_SMALL, "text size kept growing")

    def detokenize_bytes(self, tokens: Sequence[int]) -> bytes:
        """Tokens -> the raw UTF-8 bytes (a partial character stays partial)."""
        arr, n, _keep = int32_array(tokens, "tokens")
        return self._text_call(lambda *a: lib.entmtp_detokenize(self._ptr, arr, n, *a))

    def detokenize(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Tokens -> str (invalid UTF-8 handled with `errors`)."""
        return self.detokenize_bytes(tokens).decode("utf-8", errors)

    def chat_prompt(self, user_message: str, system_prompt: Optional[str] = None) -> str:
        """A single-turn chat prompt in the model's chat template. Tokenize it
        with add_special=True, parse_special=True: the text leaves the BOS the
        model asks for to the tokenizer (one BOS, never two)."""
        sys_arg = text(system_prompt) if system_prompt is not None else ffi.NULL
        user = text(user_message)
        return self._text_call(lambda *a: lib.entmtp_chat_prompt(self._ptr, sys_arg, user, *a)).decode(
            "utf-8", "replace")

    def chat_messages(self, messages: Sequence[Union[Tuple[str, str], Mapping[str, str]]]) -> str:
        """A conversation in the model's chat template: (role, content) pairs
        or {"role": ..., "content": ...} dicts, role "system" (first only),
        "user" or "assistant", the last turn the user's. Tokenize it as
        chat_prompt's text."""
        pairs = [(m["role"], m["content"]) if isinstance(m, Mapping) else tuple(m) for m in messages]
        keep = [ffi.new("char[]", text(part)) for pair in pairs for part in pair]
        roles = ffi.new("char *[]", keep[0::2])
        contents = ffi.new("char *[]", keep[1::2])
        return self._text_call(lambda *a: lib.entmtp_chat_prompt_messages(
            self._ptr, roles, contents, len(pairs), *a)).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        """True when `token` ends generation (eos, eot, im_end...)."""
        return bool(lib.entmtp_token_is_eog(self._ptr, token))

    def find_drafter(self, search_path: Optional[str] = None) -> "Drafter":
        """The drafter (heads + bank) shipped for this model, matched by its
        identity (entmtp_drafter_find): see entmtp.find_drafter."""
        from .drafter import find_drafter
        return find_drafter(self, search_path)

    def load_heads(self, path: Union[str, "os.PathLike[str]"]) -> "Heads":
        """Heads.load(self, path)."""
        return Heads(self, path)

    def __repr__(self):
        if self.closed:
            return "<entmtp.Model closed>"
        i = self.info
        return "<entmtp.Model %r %s vocab=%d hidden=%d layers=%d backend=%s>" % (
            i.name, i.architecture, i.vocab_size, i.hidden_size, i.n_layers, i.backend.name.lower())


class Heads(Handle):
    """Medusa or Hydra MTP heads for a model (safetensors). The Heads keep
    their Model alive; closing the model closes the heads (and sessions)."""

    def __init__(self, model, path):
        if not isinstance(model, Model):
            raise TypeError("Heads(model, path): model must be an entmtp.Model")
        out = ffi.new("entmtp_heads **")
        check(lib.entmtp_heads_load(model._ptr, fspath(path), out))
        self._own(out[0], lib.entmtp_heads_free, parents=(model,))
        self.model = model
        self.path = path
        self._info = None

    @classmethod
    def load(cls, model, path):
        return cls(model, path)

    @property
    def info(self):
        """HeadsInfo (read once)."""
        ptr = self._ptr  # StateError once closed
        if self._info is None:
            p = new_struct("entmtp_heads_info")
            check(lib.entmtp_heads_get_info(ptr, p))
            self._info = HeadsInfo(kind=HeadsKind(p.kind), n_heads=p.n_heads, n_layers=p.n_layers,
                                   shares_lm_head=bool(p.shares_lm_head))
        return self._info

    @property
    def n_heads(self) -> int:
        return self.info.n_heads

    def __repr__(self):
        if self.closed:
            return "<entmtp.Heads closed>"
        i = self.info
        return "<entmtp.Heads %s n_heads=%d n_layers=%d>" % (i.kind.name.lower(), i.n_heads, i.n_layers)
