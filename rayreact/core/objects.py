"""The driver's object table: every object entry, its state, holds, borrowers and segment.

One entry per object id the session can still name::

    reserve(oid) ──▶ PENDING ── fill(oid, desc) ──────▶ READY (a value)
      (a call's return,  │      fill_error(oid, err) ─▶ READY, is_error (raises on get)
       a worker's put)   │      lost(oid): a ref to an entry that is gone
                         │        (ReferenceCountingAssertionError)
                         ▼
            dependents: callbacks run once, when it becomes READY

    READY ── nothing keeps it any more ──▶ released (entry and segment gone)

    kept while any of these is non-zero:
      refcount.counts[oid]  live ObjectRefs in the driver (dropped ones queue in
                            refcount.released; release_dropped() drains them)
      holds                 pending calls using it as an argument, values nesting it,
                            a generator owning an item it has not handed out
      borrowers[w]          refs lent to worker w (ship/lend/worker_holds), each
                            given back by a RELEASE message (worker_released)

A value's descriptor is ``(INLINE | SEGMENT, pack | path, contained ids, is_error)``; an inline pack is
bytes, or a PickleBuffer once it is big enough to travel out of band (see core.wire).
A READY segment counts its size in ``store_used`` (unless it was spilled to disk),
published to the workers through the driver's doorbell page (see core.spilling).
An entry under an actor's handle key (core.handles) stands for the actor's handles:
its release calls ``on_handles_gone(actor_id)`` instead of freeing a payload.

Locks.  The table has no lock of its own: ``ObjectTable.lock`` IS the runtime's
lock (``Runtime._lock``, an RLock), handed to it at construction, so that a call
round trip takes no more lock acquisitions than before the table was split out
(the runtime's submission, pump and get already hold it when they touch entries).
It protects ``entries`` and every entry's fields, ``store_used`` and the segment
cache's mappings.  Methods whose names carry no note below expect the caller to
hold ``lock``; the few that other modules (replay) call on their own take it
themselves: ``adopt``, ``reserve_all``, ``fill_all``, ``fill_unready`` (the lock is
reentrant, so calling them with it held is fine too).  Callbacks (dependents,
``on_watched_ready``, ``on_handles_gone``) run under the lock, inside ``fill`` or a
release.  Lock order: ``Reactor.lock`` may be held while taking this lock, never the
reverse; ``refcount``'s lock is a leaf taken under it (incref/decref call nothing).
Reading ``entries`` (``get``, ``in``) needs the lock only where a consistent view of
several entries matters.
"""

from __future__ import annotations

import os

from .. import exceptions
from . import channel, handles, ids, refcount, serialization
from .serialization import INLINE, SEGMENT
from .spilling import spilling

PENDING, READY = 0, 1


class ObjectEntry:
    __slots__ = ("state", "desc", "size", "holds", "borrowers", "owner", "dependents", "is_error")

    def __init__(self, owner=None):
        self.state = PENDING
        self.desc = None
        self.size = 0
        self.holds = 0               # pending tasks using it as an argument + containers holding it
        self.borrowers = None        # worker index -> shipments not yet released
        self.owner = owner           # worker index that owns it (None: the driver)
        self.dependents = None       # callbacks run once when it becomes ready
        self.is_error = False


class ObjectTable:
    """The only owner of the driver's object entries (see the module docstring for states and locks)."""

    def __init__(self, lock, *, session, bell, store_limit, spill_dir, on_handles_gone, ready_watch=None,
                 on_watched_ready=None):
        self.lock = lock                   # the runtime's lock (see the module docstring)
        self.entries = {}                  # object id -> ObjectEntry
        self.segments = serialization.SegmentCache()
        self.store_used = 0                # bytes of READY segments in shared memory (spilled ones not counted)
        self.store_limit = store_limit
        self._session = session
        self._bell = bell                  # store_used is published in its page
        self._spill_dir = spill_dir
        self._on_handles_gone = on_handles_gone
        # While ``ready_watch`` (a mapping the owner keeps) is non-empty, fill() calls on_watched_ready(oid).
        self._ready_watch = ready_watch if ready_watch is not None else {}
        self._on_watched_ready = on_watched_ready

    def watch_ready(self, watch, on_ready):
        """While ``watch`` (a mapping the caller keeps) is non-empty, fill() calls ``on_ready(oid)`` (as the
        constructor's ``ready_watch`` / ``on_watched_ready`` do, for an owner built after the table)."""
        self._ready_watch = watch
        self._on_watched_ready = on_ready

    def __contains__(self, oid):
        return oid in self.entries

    def get(self, oid):
        return self.entries.get(oid)

    def is_ready(self, oid):
        e = self.entries.get(oid)
        return e is not None and e.state == READY

    def shared_memory_used(self):
        """Bytes held in shared memory now (spilling's measure; read without the lock)."""
        return self.store_used

    # ================================================================== reserve / fill
    def reserve(self, oid, owner=None):
        """The entry for a value still to come (``owner``: the worker that will make it; None: the driver)."""
        e = self.entries.get(oid)
        if e is not None and e.state == PENDING:
            return e
        e = ObjectEntry(owner)
        self.entries[oid] = e
        return e

    def fill(self, oid, desc):
        """``oid``'s value arrived: READY, run its dependents, free it at once if nothing keeps it."""
        e = self.entries.get(oid)
        if e is None:
            # Nobody holds a ref any more: drop the value at once.
            self.discard(desc)
            return
        if e.state == READY:
            self.discard(desc)
            return
        e.state = READY
        e.desc = desc
        e.is_error = desc[3]
        if desc[0] == SEGMENT:
            try:
                e.size = os.stat(desc[1]).st_size
            except OSError:
                e.size = 0
            self._count_segment(desc[1], e.size)
        else:
            e.size = serialization.payload_size(desc[1])
        entries = self.entries
        for c in desc[2]:
            ce = entries.get(c)
            if ce is not None:
                ce.holds += 1
        deps = e.dependents
        e.dependents = None
        if deps:
            for cb in deps:
                cb(oid, e)
        if self._ready_watch:
            self._on_watched_ready(oid)
        self._free_if_unused(oid, e)

    def fill_error(self, oid, err):
        """``oid`` becomes READY with ``err`` (an exception) as its value."""
        ser = serialization.serialize(err, is_error=True)
        self.fill(oid, (INLINE, ser.pack(), [], True))

    def lost(self, oid):
        """A ref to an entry this table no longer has: it becomes ReferenceCountingAssertionError."""
        e = self.reserve(oid)
        self.fill_error(oid, exceptions.ReferenceCountingAssertionError(oid.hex()))
        return e

    def add_ready(self, oid, desc):
        """An entry READY from the start with no payload to count or dependents to run (a handle key)."""
        e = self.reserve(oid)
        e.state = READY
        e.desc = desc
        return e

    def owner_died(self, worker_index):
        """The worker that made these values died: each of its READY values becomes OwnerDiedError."""
        for oid, e in list(self.entries.items()):
            if e.owner == worker_index and e.state == READY and not e.is_error:
                self._discard_payload(e)
                ser = serialization.serialize(exceptions.OwnerDiedError(oid.hex()), is_error=True)
                e.desc = (INLINE, ser.pack(), [], True)
                e.is_error = True

    def when_ready(self, oid, callback):
        """Run ``callback(oid, entry)`` once, when the PENDING entry ``oid`` becomes READY."""
        e = self.entries[oid]
        if e.dependents is None:
            e.dependents = []
        e.dependents.append(callback)

    # ================================================================== for other modules (take the lock)
    def adopt(self, items, describe):
        """Values made elsewhere (a replay) that the script still names: for each ``(oid, item)`` the table
        does not have yet, a READY entry whose descriptor is ``describe(item)`` (which may take the item's
        file over); items of ids already present are left alone."""
        with self.lock:
            entries = self.entries
            for oid, item in items:
                if oid in entries:
                    continue
                self.reserve(oid)
                self.fill(oid, describe(item))

    def reserve_all(self, oids):
        with self.lock:
            for oid in oids:
                self.reserve(oid)

    def fill_all(self, pairs):
        with self.lock:
            for oid, desc in pairs:
                self.fill(oid, desc)

    def fill_unready(self, oids, desc):
        """Fill each of ``oids`` that is not READY (reserving it if it is gone) with ``desc``."""
        with self.lock:
            for oid in oids:
                e = self.entries.get(oid)
                if e is None or e.state != READY:
                    self.reserve(oid)
                    self.fill(oid, desc)

    # ================================================================== holds and release
    def hold(self, oids):
        entries = self.entries
        for oid in oids:
            e = entries.get(oid)
            if e is None:
                e = self.lost(oid)
            e.holds += 1

    def unhold(self, oids):
        entries = self.entries
        for oid in oids:
            e = entries.get(oid)
            if e is not None:
                e.holds -= 1
                self._free_if_unused(oid, e)

    def pending_ids(self):
        """Ids of every object still to be produced (by a task, an actor call, a replay's hand-over)."""
        return [oid for oid, e in self.entries.items() if e.state == PENDING]

    def release_dropped(self):
        """Free what the driver's dropped refs (refcount.released) no longer keep."""
        entries = self.entries
        for oid in refcount.drain_released():
            e = entries.get(oid)
            if e is not None:
                self._free_if_unused(oid, e)

    def _free_if_unused(self, oid, e):
        if e.holds > 0 or e.borrowers or e.dependents or refcount.counts.get(oid):
            return
        entries = self.entries
        if e.state != READY or entries.get(oid) is not e:
            return
        del entries[oid]
        if handles.is_key(oid):
            self._on_handles_gone(handles.actor_of(oid))
            return
        desc = e.desc
        if desc[0] == SEGMENT:
            self._count_segment(desc[1], -e.size)
            self.segments.forget(desc[1])
            serialization.segment_pool.release(desc[1])
        for c in desc[2]:
            ce = entries.get(c)
            if ce is not None:
                ce.holds -= 1
                self._free_if_unused(c, ce)

    def discard(self, desc):
        """A descriptor no entry keeps (a late or cancelled result): its segment goes back to the pool."""
        if desc[0] == SEGMENT:
            serialization.segment_pool.release(desc[1])

    def _discard_payload(self, e):
        if e.desc and e.desc[0] == SEGMENT:
            self._count_segment(e.desc[1], -e.size)
            self.discard(e.desc)

    # ================================================================== lending to workers
    def lend(self, worker_index, contained):
        """Worker ``worker_index`` is about to unpickle these refs (it reports each one back when it drops it)."""
        entries = self.entries
        for c in contained:
            ce = entries.get(c)
            if ce is not None:
                if ce.borrowers is None:
                    ce.borrowers = {}
                ce.borrowers[worker_index] = ce.borrowers.get(worker_index, 0) + 1

    def ship(self, worker_index, e):
        """``e``'s descriptor for a worker; counts the refs nested in it as borrowed by that worker."""
        desc = e.desc
        if desc[2]:
            self.lend(worker_index, desc[2])
        return desc

    def worker_holds(self, worker_index, oids):
        """The worker made refs to these (a nested call's returns, a put, a handle): count it as a borrower,
        creating the entries (owned by it) that do not exist yet."""
        entries = self.entries
        for oid in oids:
            e = entries.get(oid)
            if e is None:
                e = self.reserve(oid, worker_index)
            if e.borrowers is None:
                e.borrowers = {}
            e.borrowers[worker_index] = e.borrowers.get(worker_index, 0) + 1

    def worker_released(self, worker_index, counts):
        """A RELEASE message: the worker dropped ``n`` of its borrowed refs to each ``(oid, n)``."""
        entries = self.entries
        for oid, n in counts:
            e = entries.get(oid)
            if e is not None and e.borrowers:
                left = e.borrowers.get(worker_index, 0) - n
                if left > 0:
                    e.borrowers[worker_index] = left
                else:
                    e.borrowers.pop(worker_index, None)
                self._free_if_unused(oid, e)

    def forget_borrower(self, worker_index):
        """The worker died: the refs it borrowed keep nothing any more."""
        for oid, e in list(self.entries.items()):
            if e.borrowers and worker_index in e.borrowers:
                del e.borrowers[worker_index]
                self._free_if_unused(oid, e)

    # ================================================================== values and segments
    def place(self, value):
        """Serialize a driver-side value into a descriptor (inline or a new segment)."""
        ser = serialization.serialize(value)
        if ser.size <= serialization.INLINE_LIMIT:
            return (INLINE, ser.inline(), ser.contained, False)
        if self._spill_dir is None and self.store_used + ser.size > self.store_limit:
            raise exceptions.ObjectStoreFullError(
                f"Failed to put an object of {ser.size} bytes: the object store holds {self.store_used} of its "
                f"{self.store_limit} bytes (set init(object_store_memory=...) to raise the limit, or drop refs).")
        path = spilling.write(ser, f"rr-{self._session}-{ids.new_id().hex()}")
        return (SEGMENT, path, ser.contained, False)

    def load(self, desc):
        """The value a descriptor stands for (a segment is read zero-copy through the driver's mapping)."""
        if desc[0] == INLINE:
            return serialization.loads_pack(desc[1])
        return serialization.loads_pack(self.segments.view(desc[1]))

    def view_segment(self, path):
        """The driver's (cached, read-only) mapping of a segment file."""
        return self.segments.view(path)

    def _count_segment(self, path, delta):
        """A segment object comes (delta > 0) or goes: shared memory's count, published to the workers."""
        if not spilling.is_spilled(path):
            self.store_used += delta
            channel.publish_store_used(self._bell, max(self.store_used, 0))

    def clear(self):
        """Shutdown: forget every entry and mapping (the files go with the session)."""
        self.entries.clear()
        self.segments.clear()
