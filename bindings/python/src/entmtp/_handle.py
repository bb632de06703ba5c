"""Ownership of C handles.

Each wrapper (Model, Heads, Bank, Policy, Session) owns one `_Res`: the C
pointer and its free function. A resource that must be released before
another one (a session before its model, heads and bank; heads before their
model) is registered as a dependent of it, and closing a resource closes its
dependents first. A policy's dependents are attachments: closing a policy
detaches it from the sessions using it (entmtp_policy_set(session, NULL))
before entmtp_policy_free.

The records never point back at the Python wrappers, so the order is right
however the wrappers die: explicitly (close(), `with`), by reference counting
(a wrapper holds its parents, so children go first), or in a garbage-collected
cycle (where weak references are already cleared and finalizers run in any
order: a parent's finalizer then closes its children's records first).
"""
from ._ffi import ffi, lib


class _Res:
    __slots__ = ("ptr", "free", "name", "deps", "parents")

    def __init__(self, ptr, free, name):
        self.ptr = ptr
        self.free = free
        self.name = name
        self.deps = []
        self.parents = []

    def add_dep(self, dep):
        self.deps.append(dep)
        dep.parents.append(self)

    def remove_dep(self, dep):
        try:
            self.deps.remove(dep)
        except ValueError:
            pass
        try:
            dep.parents.remove(self)
        except ValueError:
            pass

    def close(self):
        ptr = self.ptr
        if ptr is None:
            return
        while self.deps:
            self.deps[-1].close()  # removes itself from self.deps
        self.ptr = None
        for p in list(self.parents):
            p.remove_dep(self)
        self.free(ptr)


class _Attachment:
    """A policy attached to a session, registered as a dependent of both: it
    is closed (entmtp_policy_set(session, NULL)) before either is freed."""
    __slots__ = ("session", "parents", "ptr")

    def __init__(self, session_res):
        self.session = session_res
        self.parents = []
        self.ptr = True

    def close(self):
        if self.ptr is None:
            return
        self.ptr = None
        s = self.session.ptr
        if s is not None:
            lib.entmtp_policy_set(s, ffi.NULL)
        for p in list(self.parents):
            p.remove_dep(self)


class Handle:
    """Base of the handle wrappers: close(), context manager, closed."""

    _res = None

    def _own(self, ptr, free, parents=()):
        self._res = _Res(ptr, free, type(self).__name__)
        for p in parents:
            if p is not None:
                p._res.add_dep(self._res)

    @property
    def _ptr(self):
        r = self._res
        if r is None or r.ptr is None:
            from .errors import StateError
            raise StateError(lib.ENTMTP_ERR_STATE, "%s is closed" % type(self).__name__)
        return r.ptr

    @property
    def closed(self):
        """True after close() (or when a handle it depends on was closed)."""
        r = self._res
        return r is None or r.ptr is None

    def close(self):
        """Release the C object now (idempotent). Objects that depend on this
        one (sessions of a model, heads, bank) are closed first."""
        r = self._res
        if r is not None:
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing sensible left to do
            pass
