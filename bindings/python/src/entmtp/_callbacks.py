"""Python implementations of the `extern "Python"` trampolines declared in
entmtp_build.py. `user_data` is always a handle (ffi.new_handle) to one of
the state objects below, kept alive by its owner for as long as C may call.

No exception may escape into C: it is stored on the state object, the C
side is told to fail or stop (ENTMTP_ERR_CALLBACK, or a non-zero return), and
the wrapper that made the C call re-raises it as the __cause__ of a
CallbackError once the call has returned."""
import operator

from ._ffi import ffi, lib


class CallbackState:
    __slots__ = ("pending", "__weakref__")

    def __init__(self):
        self.pending = None

    def fail(self, exc):
        if self.pending is None:  # keep the first one
            self.pending = exc

    def take(self):
        e, self.pending = self.pending, None
        return e


class PolicyCallbacks(CallbackState):
    __slots__ = ("select", "observe", "reset")

    def __init__(self, select, observe, reset):
        super().__init__()
        self.select, self.observe, self.reset = select, observe, reset


class TokenCallbacks(CallbackState):
    __slots__ = ("tokens", "on_tokens")

    def __init__(self, on_tokens):
        super().__init__()
        self.tokens = []
        self.on_tokens = on_tokens


class ProgressCallbacks(CallbackState):
    __slots__ = ("progress",)

    def __init__(self, progress):
        super().__init__()
        self.progress = progress


@ffi.def_extern()
def _entmtp_py_select(user_data, features, n_trees, out_index):
    state = ffi.from_handle(user_data)
    try:
        from .policy import Features
        k = operator.index(state.select(Features._from_c(features), int(n_trees)))
        if not -(1 << 31) <= k < (1 << 31):
            raise OverflowError("select() returned %d, which does not fit int32_t" % k)
        out_index[0] = k
        return lib.ENTMTP_OK
    except BaseException as e:  # noqa: B902 - KeyboardInterrupt included, re-raised later
        state.fail(e)
        return lib.ENTMTP_ERR_CALLBACK


@ffi.def_extern()
def _entmtp_py_observe(user_data, outcome):
    state = ffi.from_handle(user_data)
    if state.observe is None:
        return
    try:
        from .policy import Outcome
        state.observe(Outcome._from_c(outcome))
    except BaseException as e:  # noqa: B902
        state.fail(e)


@ffi.def_extern()
def _entmtp_py_reset(user_data):
    state = ffi.from_handle(user_data)
    if state.reset is None:
        return
    try:
        state.reset()
    except BaseException as e:  # noqa: B902
        state.fail(e)


@ffi.def_extern()
def _entmtp_py_tokens(tokens, n_tokens, user_data):
    state = ffi.from_handle(user_data)
    try:
        batch = list(ffi.unpack(tokens, n_tokens))
        state.tokens.extend(batch)
        if state.on_tokens is not None and state.on_tokens(batch):
            return 1
        return 0
    except BaseException as e:  # noqa: B902
        state.fail(e)
        return 1


@ffi.def_extern()
def _entmtp_py_progress(fraction, what, user_data):
    state = ffi.from_handle(user_data)
    try:
        text = ffi.string(what).decode("utf-8", "replace") if what != ffi.NULL else ""
        return 1 if state.progress(float(fraction), text) else 0
    except BaseException as e:  # noqa: B902
        state.fail(e)
        return 1


def call_error(state, status, what):
    """After a C call that may have run callbacks of `state`: the exception to
    raise, or None. What a callback raised becomes the __cause__ of a
    CallbackError (KeyboardInterrupt and SystemExit are returned as they are);
    otherwise a failing `status` gives the matching EntmtpError."""
    from .errors import CallbackError, last_error, make_error
    msg = last_error() if status != lib.ENTMTP_OK else ""
    exc = state.take() if state is not None else None
    if exc is None:
        return make_error(status, msg) if status != lib.ENTMTP_OK else None
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return exc
    detail = "%s raised %s: %s" % (what, type(exc).__name__, exc)
    err = CallbackError(lib.ENTMTP_ERR_CALLBACK, "%s (%s)" % (msg, detail) if msg else detail)
    err.__cause__ = exc
    err.__suppress_context__ = True
    return err
