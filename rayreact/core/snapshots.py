"""One segment for identical large values: write a snapshot once, then verify and link it.

Passing the same array by value to many calls (a broadcast), or putting it again,
would copy the same bytes into a new segment each time.  The driver instead
remembers the last few large packs it wrote (a hard link to each file, mapped
read-only).  A new pack whose in-band pickle is identical and whose out-of-band
buffers are byte-for-byte equal to a remembered one gets a new hard link to that
file instead of a copy.  Comparing (memcmp) reads both sides but allocates and
writes nothing, which is several times cheaper than filling fresh pages.

Ray's snapshot semantics hold exactly: equality is checked on the caller's bytes at
the moment of the call, so a caller that changed its array in between gets a fresh
snapshot; the file never changes while it has a second name or is mapped (the
segment pool recycles neither), and readers map it read-only.

Candidates are found by the buffers' addresses and sizes (the same array passed
again); a buffer at the same address that keeps changing backs off from comparing.

Once a remembered pack has matched, the kernel watches its buffers' pages
(``write_watch``): later comparisons read only the pages written since the last one,
so passing an unchanged 128 MB array costs a page-table scan instead of a 256 MB read.
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading

from .libc import libc
from .segments import address_of, map_segment, segment_pool
from .write_watch import write_watch

MIN_BYTES = 1 << 20            # smaller packs are cheap to write; not worth a link and a mapping
MAX_ENTRIES = 8
MAX_UNHIT = 2                  # remembered packs never matched yet (a stream of distinct values pins little)

try:
    _memcmp = libc().memcmp
    _memcmp.restype = ctypes.c_int
    _memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
except (OSError, AttributeError):   # pragma: no cover - no libc: no sharing
    _memcmp = None

try:
    import numpy as _np
except ImportError:                 # pragma: no cover - values with out-of-band buffers come from numpy
    _np = None


PARALLEL_BYTES = 32 << 20      # comparisons this big are split over two threads


def _equal(a, b, n) -> bool:
    """memcmp(a, b, n) == 0; big ones in two halves at once (ctypes releases the GIL).

    A snapshot lives in shared memory, which has no transparent huge pages here: one thread's
    comparison waits on TLB misses as much as on bandwidth, and a second one saves ~20%."""
    if n < PARALLEL_BYTES or (os.cpu_count() or 1) < 2:
        return _memcmp(a, b, n) == 0
    half = (n // 2) & ~4095
    other = _helper().submit(_memcmp, a + half, b + half, n - half)
    first = _memcmp(a, b, half)
    return first == 0 and other.result() == 0


_pool = None
_pool_lock = threading.Lock()


def _helper():
    global _pool
    with _pool_lock:
        if _pool is None:
            import concurrent.futures
            _pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rayreact-compare")
        return _pool


def _forget_helper():
    global _pool
    _pool = None          # a forked child has no helper thread: it starts its own when it needs one


os.register_at_fork(after_in_child=_forget_helper)


class _Snapshot:
    __slots__ = ("path", "view", "compare", "base", "inband", "offsets", "size", "hits", "watches", "lock")

    def __init__(self, path, view, compare, inband, offsets, size):
        self.path = path              # this cache's own name for the file
        self.view = view              # read-only view: holds a shared flock, so the file is never recycled
        self.compare = compare        # what comparisons read: the writer's mapping if it has one (pages mapped)
        self.base = address_of(compare)
        self.inband = inband
        self.offsets = offsets
        self.size = size
        self.hits = 0
        self.watches = None           # one write_watch.Watched per buffer, once a comparison has matched
        self.lock = threading.Lock()  # one comparison at a time: a watch's scan consumes what it reports

    def same_as(self, ser) -> bool:
        """Whether ``ser``'s buffers (at this snapshot's addresses) still hold this snapshot's bytes."""
        if self.inband != ser.inband:
            return False
        with self.lock:
            if self.watches is not None:
                changed = [write_watch.changed(w) for w in self.watches]
                if None not in changed:
                    same = all(_equal(self.base + o + at, address_of(b) + at, n)
                               for (o, _), b, spans in zip(self.offsets, ser.buffers, changed) for at, n in spans)
                    if not same:
                        self.unwatch()
                    return same
                self.unwatch()
            # Watch first, then compare: a write during the comparison is then seen by the next scan.
            watches = [write_watch.watch(address_of(b), b.nbytes) for b in ser.buffers]
            same = all(_equal(self.base + o, address_of(b), n) for (o, n), b in zip(self.offsets, ser.buffers))
            self.watches = watches
            if not same or None in watches:
                self.unwatch()
            return same

    def unwatch(self):
        watches, self.watches = self.watches, None
        for w in watches or ():
            if w is not None:
                write_watch.unwatch(w)


class SnapshotCache:
    """Large packs this process wrote, by (in-band length, buffer addresses and sizes)."""

    def __init__(self):
        self.limit = 0                # bytes remembered (0: off; the driver turns it on)
        self._entries = collections.OrderedDict()   # key -> _Snapshot, least recently used first
        self._bytes = 0
        self._backoff = {}            # key -> [consecutive mismatches, writes left before comparing again]
        self._lock = threading.Lock()

    @staticmethod
    def _key(ser):
        return (len(ser.inband), tuple((address_of(b), b.nbytes) for b in ser.buffers))

    def _usable(self, ser):
        return (self.limit and ser.size >= MIN_BYTES and ser.buffers and _np is not None and _memcmp is not None
                and ser.size <= self.limit)

    def link_if_same(self, ser, path) -> bool:
        """Give ``path`` as a new name of a remembered file holding exactly ``ser``'s pack; False if none does."""
        if not self._usable(ser):
            return False
        key = self._key(ser)
        with self._lock:
            snap = self._entries.get(key)
            if snap is None:
                return False
            back = self._backoff.get(key)
            if back is not None and back[1] > 0:
                back[1] -= 1
                return False
            self._entries.move_to_end(key)
            # Held while comparing and linking, even if evicted meanwhile: ``view`` keeps the
            # shared lock (the pool cannot take the file), ``compare`` keeps the pages mapped.
            view, compare = snap.view, snap.compare
        if view is None or compare is None:
            return False
        same = snap.same_as(ser)
        if same:
            try:
                os.link(snap.path, path)
            except OSError:
                same = False
        del view, compare
        with self._lock:
            if same:
                snap.hits += 1
                self._backoff.pop(key, None)
            else:
                back = self._backoff.setdefault(key, [0, 0])
                back[0] = min(back[0] + 1, 6)
                back[1] = (1 << back[0]) - 1
        return same

    def remember(self, ser, path, offsets, written=None) -> None:
        """``path`` was just written with ``ser``'s pack (at ``offsets``): remember it under a name of our own.

        ``written`` is the writer's mapping of the file, if it has one: comparisons then
        read pages that are already mapped here instead of faulting in a new mapping."""
        if not self._usable(ser):
            return
        directory, name = os.path.split(path)
        parts = name.split("-", 2)
        if len(parts) < 3:
            return
        own = os.path.join(directory, f"rr-{parts[1]}-snap-{os.urandom(8).hex()}")
        try:
            os.link(path, own)
            view = map_segment(own)
        except OSError:
            self._unlink(own)
            return
        compare = view if written is None else memoryview(_np.frombuffer(written, dtype=_np.uint8))
        snap = _Snapshot(own, view, compare, bytes(ser.inband), offsets, len(view))
        key = self._key(ser)
        dropped = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
                dropped.append(old)
            self._entries[key] = snap
            self._bytes += snap.size
            unhit = [k for k, s in self._entries.items() if not s.hits and s is not snap]
            for k in unhit[:max(0, len(unhit) + 1 - MAX_UNHIT)]:
                dropped.append(self._pop(k))
            while self._entries and (self._bytes > self.limit or len(self._entries) > MAX_ENTRIES):
                dropped.append(self._pop(next(iter(self._entries))))
        for s in dropped:
            self._forget(s)

    def _pop(self, key):
        snap = self._entries.pop(key)
        self._bytes -= snap.size
        return snap

    def _forget(self, snap):
        # Unmap first (drops our shared lock) so the pool may take the file if ours was its last name.
        with snap.lock:
            snap.unwatch()
            path, snap.view, snap.compare = snap.path, None, None
        segment_pool.release(path)

    def surrender(self, size) -> bool:
        """Give the pool a remembered file of about ``size`` bytes that nothing else uses any more.

        Called when the pool has no file for a write: reusing a snapshot's pages beats
        allocating fresh ones, and one nobody links to or maps is only a guess anyway."""
        with self._lock:
            for key, snap in self._entries.items():
                if size <= snap.size <= size + size // 2:
                    try:
                        if os.stat(snap.path).st_nlink != 1:
                            continue
                    except OSError:
                        continue
                    self._pop(key)
                    break
            else:
                return False
        self._forget(snap)
        return True

    @staticmethod
    def _unlink(path):
        try:
            os.unlink(path)
        except OSError:
            pass

    def clear(self):
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self._bytes = 0
            self._backoff.clear()
        for snap in entries:
            with snap.lock:
                snap.unwatch()
                snap.view = snap.compare = None
            self._unlink(snap.path)


snapshots = SnapshotCache()
