"""ObjectRef: a handle on a value that a task will produce (or ``put`` produced), and the generators of refs
a generator task gives.  The facade re-exports them (``rayreact.ObjectRef``, ``rayreact.object_ref``)."""

from __future__ import annotations

import concurrent.futures
import threading

from . import context, refcount, serialization


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
        fut = concurrent.futures.Future()

        def resolve():
            try:
                fut.set_result(context.runtime().get_values([self._id], None)[0])
            except BaseException as exc:  # noqa: BLE001 - the future carries whatever get raised
                fut.set_exception(exc)

        threading.Thread(target=resolve, daemon=True, name="rayreact-future").start()
        return fut

    def as_future(self):
        import asyncio
        return asyncio.wrap_future(self.future())

    def __await__(self):
        return self.as_future().__await__()

    def _on_completed(self, callback):
        self.future().add_done_callback(lambda f: callback(f.result()))


serialization.register_simple_type(ObjectRef, notes_refs=True)


def _rebuild(object_id):
    ref = ObjectRef(object_id)
    rt = context.current
    if rt is not None:
        rt.on_ref_unpickled(object_id)
    return ref


class ObjectRefGenerator:
    """What a generator task returns (``num_returns="streaming"``, Ray's default for generators).

    Iterating yields one ObjectRef per value the task yields, as soon as each is
    produced; if the task raises, the next ref holds the error.
    """

    def __init__(self, stream_ref: ObjectRef):
        self._stream_ref = stream_ref
        self._index = 0
        self._finished = False

    def __iter__(self):
        return self

    def __next__(self):
        ref = self._next_sync(None)
        if ref is None:
            raise StopIteration
        return ref

    def _next_sync(self, timeout_s=None):
        if self._finished:
            return None
        kind, oid = context.current.stream_next(self._stream_ref._id, self._index, timeout_s)
        if kind == "item":
            self._index += 1
            return ObjectRef(oid) if not isinstance(oid, ObjectRef) else oid
        self._finished = True
        if kind == "error":
            return self._stream_ref
        return None

    def __aiter__(self):
        return self

    async def __anext__(self):
        import asyncio
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next_sync, None)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def completed(self) -> ObjectRef:
        return self._stream_ref

    def is_finished(self) -> bool:
        return self._finished

    def next_ready(self) -> bool:
        try:
            kind, _ = context.current.stream_next(self._stream_ref._id, self._index, 0, peek=True)
        except Exception:
            return False
        return kind != "pending"

    def __del__(self):
        try:
            if not self._finished:
                rt = context.current
                if rt is not None:
                    rt.stream_drop(self._stream_ref._id, self._index)
        except Exception:
            pass

    def __repr__(self):
        return f"ObjectRefGenerator({self._stream_ref.hex()})"


class DynamicObjectRefGenerator:
    """The value of a ``num_returns="dynamic"`` task: an iterable of ObjectRefs."""

    def __init__(self, refs):
        self._refs = list(refs)

    def __iter__(self):
        return iter(self._refs)

    def __len__(self):
        return len(self._refs)
