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

From the moment a pack is written, the kernel watches its buffers' pages
(``write_watch``): a later comparison reads only the pages written since the last one,
so passing an unchanged 128 MB array costs a page-table scan instead of a 256 MB read;
and if a few pages changed and no object or reader uses the file any more, just those
pages are written into it.  A buffer found mostly rewritten is not watched for a while
(each watched page costs a fault at its first write).
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading

from .libc import libc
from .segments import address_of, map_segment, segment_pool, try_lock
from .write_watch import write_watch

MIN_BYTES = 1 << 20            # smaller packs are cheap to write; not worth a link and a mapping
MAX_ENTRIES = 8
PATCH_FRACTION = 4             # a pack whose buffers changed beyond 1/4 is written afresh, and no longer watched
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


def _write_at(fd, data, offset):
    """pwrite all of ``data`` at ``offset``; big ones in two halves at once (os.pwrite releases the GIL)."""
    n = len(data)
    if n >= PARALLEL_BYTES and (os.cpu_count() or 1) >= 2:
        half = (n // 2) & ~4095
        other = _helper().submit(_write_all_at, fd, data[half:], offset + half)
        _write_all_at(fd, data[:half], offset)
        other.result()
    else:
        _write_all_at(fd, data, offset)


def _write_all_at(fd, data, offset):
    data = memoryview(data)
    while len(data):
        done = os.pwrite(fd, data, offset)
        data, offset = data[done:], offset + done


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
    __slots__ = ("path", "view", "compare", "base", "inband", "offsets", "size", "hits", "watches", "lock",
                 "rewritten")

    def __init__(self, path, view, compare, inband, offsets, size):
        self.path = path              # this cache's own name for the file
        self.view = view              # read-only view: holds a shared flock, so the file is never recycled
        self.compare = compare        # what comparisons read: the writer's mapping if it has one (pages mapped)
        self.base = address_of(compare)
        self.inband = inband
        self.offsets = offsets
        self.size = size
        self.hits = 0
        self.watches = None           # one write_watch.Watched per buffer, while the kernel vouches for the rest
        self.rewritten = False        # the last call found most of it changed: not worth watching
        self.lock = threading.Lock()  # one comparison at a time: a watch's scan consumes what it reports

    def give(self, ser, path) -> bool:
        """Make ``path`` a name of this snapshot's file holding exactly ``ser``'s pack, if cheaply possible.

        Linked as it is if ``ser``'s buffers (at this snapshot's addresses) still hold its
        bytes; or, if the write watch knows which pages changed and nothing else names or
        maps the file, after writing just those pages into it."""
        with self.lock:
            if self.view is None or self.compare is None:
                return False                      # forgotten meanwhile
            if self.watches is None and self.inband != ser.inband:
                return False                      # another value: not worth comparing the buffers
            stale = self._stale(ser)
            if stale is None:
                return False
            if any(stale) or self.inband != ser.inband:
                self.rewritten = sum(n for spans in stale for _, n in spans) > self.size // PATCH_FRACTION
                if self.rewritten or not self._patch(ser, stale):
                    # Mostly rewritten (the watch's write faults would cost more than it saves), or
                    # not patched: the file no longer matches what the watch vouches for.
                    self.unwatch()
                    return False
            try:
                os.link(self.path, path)
            except OSError:
                return False
            return True

    def _stale(self, ser):
        """Per buffer, the spans [(offset, length)] whose bytes differ from the file's; None if not known where.

        Called with ``lock`` held.  Without a watch, a full comparison that matches starts one
        (watched first, then compared: a write meanwhile is then seen by the next scan)."""
        if self.watches is not None:
            changed = [write_watch.changed(w) for w in self.watches]
            if None not in changed:
                return [[(at, n) for at, n in spans if not _equal(self.base + o + at, addr + at, n)]
                        for (o, _), addr, spans in zip(self.offsets, map(address_of, ser.buffers), changed)]
            self.unwatch()
            if self.inband != ser.inband:
                return None
        self.watches = [write_watch.watch(address_of(b), b.nbytes) for b in ser.buffers]
        if None in self.watches:
            self.unwatch()
        if all(_equal(self.base + o, address_of(b), n) for (o, n), b in zip(self.offsets, ser.buffers)):
            return [[] for _ in ser.buffers]
        self.unwatch()
        return None

    def _patch(self, ser, stale) -> bool:
        """Write ``ser``'s changed spans (and its head) into the file, if this cache alone has it.

        Called with ``lock`` held.  The file must have no other name (no live object is it)
        and no reader anywhere (an exclusive ``flock``, as the segment pool takes files), so
        our own view, whose shared lock would refuse it, lets go first."""
        compares_view = self.compare is self.view
        self.view = None
        if compares_view:
            self.compare = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_nlink != 1 or not try_lock(fd):
                return False
            _write_at(fd, ser.head_for(self.offsets), 0)
            for (o, _), b, spans in zip(self.offsets, ser.buffers, stale):
                flat = b.cast("B") if b.ndim != 1 or b.format != "B" else b
                for at, n in spans:
                    _write_at(fd, flat[at:at + n], o + at)
            self.inband = bytes(ser.inband)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)                          # (drops the exclusive lock)
            try:
                self.view = map_segment(self.path)
            except OSError:
                self.view = None
            if compares_view:
                self.compare = self.view
                self.base = address_of(self.view) if self.view is not None else 0

    def unwatch(self):
        watches, self.watches = self.watches, None
        _unwatch_all(watches)


def _unwatch_all(watches):
    for w in watches or ():
        if w is not None:
            write_watch.unwatch(w)


class _Backoff:
    """Keys whose last attempts failed sit out 1, 3, 7... (at most 63) of the next ones; callers hold the lock."""

    LIMIT = 4 * MAX_ENTRIES           # keys remembered (addresses of buffers long freed are dropped wholesale)

    def __init__(self):
        self._keys = {}               # key -> [failures in a row, attempts left to sit out]

    def holds(self, key) -> bool:
        """Whether this attempt sits out (and counts as one)."""
        entry = self._keys.get(key)
        if entry is None or entry[1] <= 0:
            return False
        entry[1] -= 1
        return True

    def failed(self, key):
        if key not in self._keys and len(self._keys) >= self.LIMIT:
            self._keys.clear()
        entry = self._keys.setdefault(key, [0, 0])
        entry[0] = min(entry[0] + 1, 6)
        entry[1] = (1 << entry[0]) - 1

    def forget(self, key):
        self._keys.pop(key, None)

    def clear(self):
        self._keys.clear()


class SnapshotCache:
    """Large packs this process wrote, by (in-band length, buffer addresses and sizes)."""

    def __init__(self):
        self.limit = 0                # bytes remembered (0: off; the driver turns it on)
        self._entries = collections.OrderedDict()   # key -> _Snapshot, least recently used first
        self._bytes = 0
        self._backoff = _Backoff()    # keys that keep mismatching: writes left before comparing again
        self._rewritten = _Backoff()  # keys found mostly changed: files left unwatched
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
            if self._backoff.holds(key):
                return False
            self._entries.move_to_end(key)
            # Held while comparing and linking, even if evicted meanwhile: ``view`` keeps the
            # shared lock (the pool cannot take the file), ``compare`` keeps the pages mapped.
            view, compare = snap.view, snap.compare
        if view is None or compare is None:
            return False
        del view, compare                 # (give holds the snapshot's own lock, which eviction waits for)
        same = snap.give(ser, path)
        with self._lock:
            if snap.rewritten:
                self._rewritten.failed(key)
            if same:
                snap.hits += 1
                self._backoff.forget(key)
                self._rewritten.forget(key)
            else:
                self._backoff.failed(key)
        return same

    def watch_before_write(self, ser):
        """Watches over ``ser``'s buffers, started before they are copied into a new file, or None.

        Given to ``remember``, they let a later call with the buffers changed a little write
        just the changed pages into that file.  A value found mostly rewritten is watched
        again only after 1, 3, 7... more files: a watched page costs a fault at its first write."""
        if not self._usable(ser) or not write_watch.available():
            return None
        with self._lock:
            if self._rewritten.holds(self._key(ser)):
                return None
        watches = [write_watch.watch(address_of(b), b.nbytes) for b in ser.buffers]
        if None in watches:
            _unwatch_all(watches)
            return None
        return watches

    @staticmethod
    def let_go(watches) -> None:
        """Stop the watches of a write that failed."""
        _unwatch_all(watches)

    def remember(self, ser, path, offsets, written=None, watches=None) -> None:
        """``path`` was just written with ``ser``'s pack (at ``offsets``): remember it under a name of our own.

        ``written`` is the writer's mapping of the file, if it has one: comparisons then
        read pages that are already mapped here instead of faulting in a new mapping.
        ``watches`` are from ``watch_before_write``; they become the snapshot's."""
        if not self._usable(ser):
            _unwatch_all(watches)
            return
        directory, name = os.path.split(path)
        parts = name.split("-", 2)
        if len(parts) < 3:
            _unwatch_all(watches)
            return
        own = os.path.join(directory, f"rr-{parts[1]}-snap-{os.urandom(8).hex()}")
        try:
            os.link(path, own)
            view = map_segment(own)
        except OSError:
            self._unlink(own)
            _unwatch_all(watches)
            return
        compare = view if written is None else memoryview(_np.frombuffer(written, dtype=_np.uint8))
        snap = _Snapshot(own, view, compare, bytes(ser.inband), offsets, len(view))
        snap.watches = watches
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
            self._rewritten.clear()
        for snap in entries:
            with snap.lock:
                snap.unwatch()
                snap.view = snap.compare = None
            self._unlink(snap.path)


snapshots = SnapshotCache()
