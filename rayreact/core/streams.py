"""Generator tasks' streams: the items a generator yielded, until their consumer takes them as refs.

::

    worker ──STREAM_ITEM──▶ on_item() ──▶ object table (the stream holds the item)
                                            │
    consumer: Runtime.stream_next ──▶ next() ◀┤ (waits through the runtime's wait_until)
    nested consumer: V_STREAM_NEXT ──▶ poll() / add_waiter() ──▶ REPLY when the item comes
    the generator's own return id READY ──▶ on_done() (the table watches ``states``)

One ``StreamState`` per generator still being consumed, keyed by the stream id (the generator call's
return id).  Everything runs under the runtime's lock, which ``next`` takes itself.
"""

from __future__ import annotations

from .. import exceptions
from .refs import ObjectRef
from . import submission
from .objects import READY


class StreamState:
    __slots__ = ("held", "pending_handoff", "waiters", "done", "dropped", "dynamic")

    def __init__(self):
        self.held = set()            # yielded values not yet handed out as refs
        self.pending_handoff = []
        self.waiters = []            # (worker, req_id, index) of nested consumers
        self.done = False
        self.dropped = False
        self.dynamic = False


class Streams:
    """Every live generator stream.  ``table``: the object table; ``reply(w, req_id, payload)`` answers a
    nested consumer; ``lock`` and ``wait_until`` are the runtime's."""

    def __init__(self, table, reply, lock, wait_until):
        self._table = table
        self._objects = table.entries
        self._reply = reply
        self._lock = lock
        self._wait_until = wait_until
        self.states = {}             # stream id -> StreamState, for generator tasks still being consumed
        table.watch_ready(self.states, self.on_done)

    def stream(self, stream_id):
        st = self.states.get(stream_id)
        if st is None:
            st = self.states[stream_id] = StreamState()
        return st

    def on_item(self, w, oid, desc, keep):
        stream_id = oid[:24] + b"\0\0\0\0"
        table = self._table
        table.reserve(oid)
        st = self.stream(stream_id)
        st.dynamic = not keep
        if not st.dropped:
            table.hold((oid,))      # the generator owns the value until it hands the ref out
            st.held.add(oid)
        table.fill(oid, desc)
        self._answer_waiters(stream_id, st)

    def on_done(self, oid):
        st = self.states.get(oid)
        if st is None:
            return
        st.done = True
        if st.dynamic:
            # The DynamicObjectRefGenerator value now holds its items.
            held, st.held = st.held, set()
            self._table.unhold(held)
        self._answer_waiters(oid, st)
        if st.dropped or st.dynamic:
            del self.states[oid]

    def poll(self, stream_id, index, take, w=None):
        """("item", id) | ("error", None) | ("end", None) | ("pending", None)."""
        item = submission.item_id(stream_id, index)
        e = self._objects.get(item)
        st = self.states.get(stream_id)
        if e is not None and e.state == READY and st is not None and item in st.held:
            if take:
                if w is not None:
                    self._table.worker_holds(w.index, [item])
                    st.held.discard(item)
                    self._table.unhold((item,))    # (the worker's borrow keeps it now)
                else:
                    st.held.discard(item)
                    st.pending_handoff.append(item)
            return ("item", item)
        s = self._objects.get(stream_id)
        if s is not None and s.state == READY:
            return ("error", None) if s.is_error else ("end", None)
        if s is None and st is None:
            return ("end", None)
        return ("pending", None)

    def next(self, stream_id, index, timeout, peek=False):
        """Runtime.stream_next: takes the lock, and waits without it."""
        with self._lock:
            result = self.poll(stream_id, index, take=False)
        if result[0] == "pending" and not peek:
            ok = self._wait_until(lambda: self.poll(stream_id, index, False)[0] != "pending", timeout)
            if not ok:
                raise exceptions.GetTimeoutError(f"No item of the generator was ready within {timeout} s.")
        if peek:
            return result
        with self._lock:
            result = self.poll(stream_id, index, take=True)
            if result[0] == "item":
                ref = ObjectRef(result[1])
                st = self.states[stream_id]
                st.pending_handoff.remove(result[1])
                self._table.unhold((result[1],))    # (the ref keeps it now)
                return ("item", ref)
        return result

    def next_for_worker(self, w, req_id, stream_id, index, peek):
        """V_STREAM_NEXT: answer now, or once the item comes."""
        result = self.poll(stream_id, index, take=not peek, w=w)
        if result[0] == "pending" and not peek:
            self.stream(stream_id).waiters.append((w, req_id, index))
        else:
            self._reply(w, req_id, result)

    def drop(self, stream_id):
        st = self.states.get(stream_id)
        if st is None:
            return
        st.dropped = True
        held, st.held = st.held, set()
        self._table.unhold(held)
        if st.done:
            del self.states[stream_id]

    def _answer_waiters(self, stream_id, st):
        if not st.waiters:
            return
        still = []
        for w, req_id, index in st.waiters:
            result = self.poll(stream_id, index, take=True, w=w)
            if result[0] == "pending":
                still.append((w, req_id, index))
            else:
                self._reply(w, req_id, result)
        st.waiters = still

    def error_as_item(self, w, stream_id, error_desc):
        """A dynamic generator that raised: its items stay, and the error becomes one more item (as in Ray)."""
        if self._objects.get(stream_id) is None:
            return [(stream_id, error_desc)]      # nobody holds the generator's ref
        from .refs import DynamicObjectRefGenerator
        st = self.states.get(stream_id)
        count = len(st.held) if st is not None else 0
        self.on_item(w, submission.item_id(stream_id, count), error_desc, False)
        items = [ObjectRef(submission.item_id(stream_id, i)) for i in range(count + 1)]
        return [(stream_id, self._table.place(DynamicObjectRefGenerator(items)))]
