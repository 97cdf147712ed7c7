"""ObjectRef: a handle on a value that a task will produce (or ``put`` produced)."""

from __future__ import annotations

from .core import refcount, serialization


class ObjectRef:
    """Hashable, picklable; holding one keeps its value alive (see core.refcount)."""

    __slots__ = ("_id", "__weakref__")

    def __init__(self, object_id: bytes):
        self._id = object_id
        refcount.incref(object_id)

    def __del__(self):
        try:
            refcount.decref(self._id)
        except Exception:  # interpreter teardown
            pass

    def binary(self) -> bytes:
        return self._id

    def hex(self) -> str:
        return self._id.hex()

    def task_id(self):
        return self._id[:24]

    def is_nil(self) -> bool:
        return not any(self._id)

    def __hash__(self):
        return hash(self._id)

    def __eq__(self, other):
        return isinstance(other, ObjectRef) and other._id == self._id

    def __repr__(self):
        return f"ObjectRef({self._id.hex()})"

    def __reduce__(self):
        serialization.note_contained_ref(self._id)
        return (_rebuild, (self._id,))

    def __copy__(self):
        return ObjectRef(self._id)

    def __deepcopy__(self, memo):
        return ObjectRef(self._id)

    def future(self):
        """A concurrent.futures.Future resolved with the value (or its error)."""
        from . import _api
        return _api._future_of(self)

    def as_future(self):
        import asyncio
        return asyncio.wrap_future(self.future())

    def __await__(self):
        return self.as_future().__await__()

    def _on_completed(self, callback):
        self.future().add_done_callback(lambda f: callback(f.result()))


def _rebuild(object_id):
    from .core import context
    ref = ObjectRef(object_id)
    rt = context.current
    if rt is not None:
        rt.on_ref_unpickled(object_id)
    return ref
