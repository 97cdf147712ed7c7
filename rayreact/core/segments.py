"""Segment files: the session's pool of freed files, the writable mappings a process keeps, read-only maps.

A segment is one file in the session's shared-memory directory (``rr-<session>-...``).
A fresh tmpfs page is expensive (a fault, a zeroed page, LRU bookkeeping: about
0.5 ms per MB on the reference machine, five times a memcpy), and so is setting
up and tearing down the page tables of a mapping.  Hence:

- freed segments go to a pool that every process of the session takes from, so
  writing a large value lands in pages that already exist;
- a process keeps its writable mapping of a file it wrote (keyed by inode: the
  file changes name as it cycles through the pool), so when it takes that file
  again, writing is a plain memcpy with no page-table work.

Safety rules:

- A file enters the pool only if nobody maps it (readers hold a shared ``flock``
  as long as their mapping lives; pooling needs an exclusive one) and it has one
  name (a second hard link means someone will still read it).
- Taking a file is an atomic ``rename``, so two processes never take the same file.
- A kept mapping is written only after its file was taken again.  It pins memory
  only while its inode is otherwise dead; dead inodes (no name left) are dropped
  whenever this process takes or releases a segment, and the bytes a process
  keeps are bounded (``keep_limit``).
"""

from __future__ import annotations

import collections
import fcntl
import mmap
import os
import threading
import time
import weakref

PAGE = mmap.PAGESIZE
MIN_POOLED = 64 * 1024                 # smaller files are not worth pooling
MAX_PENDING = 32                       # freed files still mapped, waiting to join the pool
POOL_IDLE_SECONDS = 10.0               # a pooled file unused this long is unlinked
SETTLE_SECONDS = 0.05                  # every pending file is tried this often (those seen unviewed here, at once)
MAX_KEPT = 32                          # kept mappings hold a descriptor each: bounded in number too
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def page_round(n: int) -> int:
    return (n + PAGE - 1) & ~(PAGE - 1)


class Writable:
    """A taken segment, mapped read-write: ``mm`` over ``size`` bytes of the file ``fd`` (inode ``ino``)."""

    __slots__ = ("mm", "fd", "size", "ino")

    def __init__(self, mm, fd, size, ino):
        self.mm = mm
        self.fd = fd
        self.size = size
        self.ino = ino

    def close(self):
        try:
            self.mm.close()
        except BufferError:
            pass                     # a snapshot compares against it: unmapped when that goes
        finally:
            os.close(self.fd)


def _session_of(name):
    parts = name.split("-", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "rr" else None


class SegmentPool:
    """Freed segment files kept (up to ``limit`` bytes) for reuse by any process of the session.

    Only the driver pools (it alone knows when an object is free); every process
    takes.  Pool files are named ``rr-<session>-pool-<size>-<inode>``: a process
    finds the pooled files it still maps by name, without listing the directory.
    """

    def __init__(self):
        self.limit = 0                  # bytes of pooled files (set by the driver; 0: no pooling)
        self.spill_dir = None           # files there (spilled values, on disk) are never pooled
        self.keep_limit = 128 << 20     # bytes of writable mappings this process keeps (the driver keeps more)
        self._kept = collections.OrderedDict()   # inode -> Writable, least recently used first
        self._kept_bytes = 0
        self._takes = 0
        self._drops = 0
        self._last_decay = 0.0
        self._last_settle = 0.0
        self._unviewed = set()          # inodes this process stopped viewing since the last settle
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the pool directory
    @staticmethod
    def _pool_files(directory, session):
        """(size, inode, name) of the session's pooled files."""
        return SegmentPool._scan(directory, session)["pool"]

    @staticmethod
    def _scan(directory, session):
        """{"pool": [...], "pend": [...]}: (size, inode, name) of the session's pooled and pending files."""
        try:
            names = os.listdir(directory)
        except OSError:
            names = ()
        out = {}
        for kind in ("pool", "pend"):
            prefix = f"rr-{session}-{kind}-"
            found = out[kind] = []
            for name in [n for n in names if n.startswith(prefix)]:
                fields = name[len(prefix):].split("-")
                try:
                    found.append((int(fields[0]), int(fields[1]), name))
                except (ValueError, IndexError):
                    pass
        return out

    # ------------------------------------------------------------------ taking
    def take(self, path, size):
        """Rename a pooled file of a fitting size to ``path``: a ``Writable`` over it, or None."""
        directory, name = os.path.split(path)
        session = _session_of(name)
        if session is None or size < MIN_POOLED:
            return None
        self._takes += 1
        if self._takes % 16 == 0:
            self._prune()
            read_maps.prune()
        # Pool names are fixed by size and inode, so a file this process still maps is found without a listing.
        # The least recently written first: a file cycles back into the pool only after its readers let go.
        with self._lock:
            mine = [(ino, w.size) for ino, w in self._kept.items() if size <= w.size <= size + size // 2]
        for ino, kept_size in mine:
            try:
                os.rename(os.path.join(directory, f"rr-{session}-pool-{kept_size:015d}-{ino}"), path)
            except OSError:
                continue
            return self._writable(path, ino, kept_size, size)
        self._prune()
        read_maps.prune()
        candidates = [f for f in self._pool_files(directory, session) if size <= f[0] <= size + size // 2]
        # A file this process still maps first (no page-table work), then the smallest.
        kept = self._kept
        candidates.sort(key=lambda f: (f[1] not in kept, f[0]))
        for pooled_size, ino, pooled in candidates:
            try:
                os.rename(os.path.join(directory, pooled), path)
            except OSError:
                continue            # another process took it first
            return self._writable(path, ino, pooled_size, size)
        return None

    def _writable(self, path, ino, pooled_size, size):
        with self._lock:
            w = self._kept.pop(ino, None)
            if w is not None:
                self._kept_bytes -= w.size
        # Slightly larger files are used whole (readers go by the pack's header), so a file
        # keeps its size, and its mapping, as values of similar sizes cycle through it.
        whole = pooled_size <= size + size // 8
        if w is not None and whole and w.size == pooled_size:
            return w
        if w is not None:
            w.close()
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            target = pooled_size if whole else page_round(size)
            if target != pooled_size:
                os.ftruncate(fd, target)
            mm = mmap.mmap(fd, target, mmap.MAP_SHARED | _MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        return Writable(mm, fd, target, os.fstat(fd).st_ino)

    def written(self, w):
        """The writer is done with ``w``: keep its mapping for the next time this process takes the file."""
        if w.size > self.keep_limit:
            w.close()
            return
        evicted = []
        with self._lock:
            self._kept[w.ino] = w
            self._kept_bytes += w.size
            while self._kept_bytes > self.keep_limit or len(self._kept) > MAX_KEPT:
                _, old = self._kept.popitem(last=False)
                self._kept_bytes -= old.size
                evicted.append(old)
        for old in evicted:
            old.close()

    def _prune(self):
        """Drop kept mappings of files that no longer have a name (they would pin memory)."""
        if not self._kept:
            return
        dead = []
        with self._lock:
            for ino, w in list(self._kept.items()):
                try:
                    alive = os.fstat(w.fd).st_nlink > 0
                except OSError:
                    alive = False
                if not alive:
                    del self._kept[ino]
                    self._kept_bytes -= w.size
                    dead.append(w)
        for w in dead:
            w.close()

    def drop_mapping(self, path):
        """One name of a file goes away; its kept mapping (if any) is dropped once the file has no name left.

        That file keeps other names (a reader's link), so this only sweeps the kept mappings of files gone
        meanwhile: every 16th call (an fstat per kept mapping on every freed result cost more than the
        result's write)."""
        self._drops += 1
        if self._drops % 16 == 0:
            self._prune()

    def clear(self):
        read_maps.clear()
        with self._lock:
            kept = list(self._kept.values())
            self._kept.clear()
            self._kept_bytes = 0
        for w in kept:
            w.close()

    # ------------------------------------------------------------------ releasing
    def release(self, path) -> None:
        """An object's segment is free: pool it if nobody maps it and there is room, else unlink it.

        A file still mapped somewhere (a value the script holds although its ref is gone)
        waits under a "pending" name instead, and joins the pool once its last reader
        lets go; its pages are in use meanwhile, so this costs no memory."""
        directory, name = os.path.split(path)
        if self.limit <= 0 or directory == self.spill_dir:
            self._unlink(path)
            return
        session = _session_of(name)
        files = self._release(path, directory, session)
        if session is None:
            return
        if files is None and (self._unviewed or time.monotonic() - self._last_settle >= SETTLE_SECONDS):
            files = self._scan(directory, session)
        if files is not None:
            if files["pend"]:
                self._settle_pending(directory, session, files)
            self._decay(directory, files)

    def _release(self, path, directory, session):
        """Pool, set pending or unlink ``path``: the directory's scan if it took one, else None."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            self._unlink(path)
            return None
        if session is None or st.st_nlink != 1:
            os.close(fd)
            try:
                os.unlink(path)             # another name will still be read: the pages stay as they are
            except OSError:
                pass
            return None
        files = self._scan(directory, session)
        try:
            if try_lock(fd):
                self._pool(path, directory, session, os.fstat(fd), files)   # (links counted under the lock)
            elif len(files["pend"]) < MAX_PENDING:
                os.rename(path, os.path.join(directory, _pool_name(session, "pend", st)))
            else:
                self._unlink(path)
        except OSError:
            self._unlink(path)
        finally:
            os.close(fd)
        return files

    def _pool(self, path, directory, session, st, files):
        """``path`` (locked by us, one name) joins the pool, making room by dropping its oldest files."""
        if st.st_nlink != 1:
            self._unlink(path)        # linked again while it waited (a reader's name): never recycled
            return
        over = sum(f[0] for f in files["pool"]) + st.st_size - self.limit
        if over > 0 and st.st_size <= self.limit:
            self._drop_pooled(directory, files, lambda age, freed: freed < over)
            over = sum(f[0] for f in files["pool"]) + st.st_size - self.limit
        if over <= 0:
            pooled = _pool_name(session, "pool", st)
            os.rename(path, os.path.join(directory, pooled))
            files["pool"].append((st.st_size, st.st_ino, pooled))
        else:
            self._unlink(path)

    def _drop_pooled(self, directory, files, more):
        """Unlink pooled files, oldest first, while ``more(seconds pooled, bytes freed so far)``."""
        now = time.time()
        aged = []
        for entry in files["pool"]:
            try:
                aged.append((now - os.stat(os.path.join(directory, entry[2])).st_ctime, entry))
            except OSError:
                files["pool"].remove(entry)     # taken meanwhile
        freed = 0
        for age, entry in sorted(aged, key=lambda a: -a[0]):
            if not more(age, freed):
                break
            try:
                os.unlink(os.path.join(directory, entry[2]))
            except OSError:
                pass
            else:
                freed += entry[0]
            files["pool"].remove(entry)
        if freed:
            self._prune()
            read_maps.prune()

    def _decay(self, directory, files):
        """Files left in the pool for a while go back to the system (the pool serves a working set)."""
        now = time.monotonic()
        if now - self._last_decay < 1.0 or not files["pool"]:
            return
        self._last_decay = now
        self._drop_pooled(directory, files, lambda age, freed: age > POOL_IDLE_SECONDS)

    def unviewed(self, ino):
        """This process no longer views the file of inode ``ino`` (core.segments.ReadMaps): if it waits under
        a pending name, the next release tries to pool it."""
        if len(self._unviewed) >= 4 * MAX_PENDING:
            # (a process that views many files and releases none): bounded, and the next settle tries all
            self._unviewed = set()
            self._last_settle = 0.0
        self._unviewed.add(ino)

    def _settle_pending(self, directory, session, files):
        """Pending files nobody maps any more join the pool (or go, if it is full).

        Trying one costs an open, a lock and a close: every pending file is tried only every
        ``SETTLE_SECONDS`` (a worker may be the one that let go), and in between only the files this
        process was seen to stop viewing, the usual case (the script held the last round's value while
        its ref was dropped): trying all 32 on every release cost ~200 us per object."""
        now = time.monotonic()
        if now - self._last_settle >= SETTLE_SECONDS:
            self._last_settle = now
            self._unviewed = set()
            pending = files["pend"]
        else:
            unviewed, self._unviewed = self._unviewed, set()
            pending = [f for f in files["pend"] if f[1] in unviewed]
        for _, _, name in pending:
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if try_lock(fd):
                    self._pool(path, directory, session, os.fstat(fd), files)
            except OSError:
                pass
            finally:
                os.close(fd)

    def _unlink(self, path):
        try:
            os.unlink(path)
        except OSError:
            return
        self._prune()
        read_maps.prune()


def try_lock(fd) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False                 # mapped somewhere: its pages must stay as they are


def _pool_name(session, kind, st):
    # Unique (one file per inode) and predictable: a process finds the files it still maps by name.
    return f"rr-{session}-{kind}-{st.st_size:015d}-{st.st_ino}"


segment_pool = SegmentPool()


def create_writable(path, size):
    """A new segment file of ``size`` bytes, its pages allocated now (a full /dev/shm is an error here,
    not a SIGBUS at the first write) and mapped read-write; None if it cannot be made."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, size)
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED | _MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    return Writable(mm, fd, size, os.fstat(fd).st_ino)


def address_of(buf) -> int:
    """Where a buffer's bytes start in this process."""
    import numpy as np
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data if len(buf) else 0


class _Mapped:
    """One read-only mapping of a file (``ino``: device and inode) and the descriptor its shared lock lives on."""

    __slots__ = ("mm", "fd", "size", "ino", "users", "cached")

    def __init__(self, mm, fd, size, ino):
        self.mm = mm
        self.fd = fd
        self.size = size
        self.ino = ino
        self.users = 0               # live views handed out (each a numpy root the finalizer watches)
        self.cached = True

    def close(self):
        try:
            self.mm.close()
        except BufferError:
            pass                     # something still views it: unmapped when that goes
        os.close(self.fd)


class ReadMaps:
    """Read-only mappings by inode, reused while the file keeps its inode and size.

    Mapping a file and touching its pages costs a page-table entry per page, and
    unmapping tears them down again.  A file is often read again under the same inode:
    one snapshot passed to many calls, or a pooled file that comes back to the same
    reader round after round (a worker's result).  So a mapping stays after its last
    view dies, and is reused if this process maps the same inode again.

    The shared ``flock`` that keeps the pool from recycling a file is held only while
    views are alive: each view is a numpy array whose finalizer counts it out, and the
    last one unlocks the file.  An idle mapping of a file the pool recycled then simply
    shows the new contents the next time it is used.  Idle mappings are bounded
    (``limit`` bytes) and dropped as soon as their file has no name left.
    """

    def __init__(self):
        self.limit = 128 << 20       # bytes of idle mappings this process keeps (the driver keeps more)
        self._maps = collections.OrderedDict()   # (device, inode) -> _Mapped, least recently used first
        self._bytes = 0
        self._lock = threading.RLock()   # finalizers may run anywhere, also inside view()
        self._np = None

    def view(self, path: str) -> memoryview:
        np = self._numpy()
        if np is None:
            return _map_once(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            with self._lock:
                m = self._maps.get((st.st_dev, st.st_ino))
                if m is not None and m.size != st.st_size:
                    self._evict(m)           # the file was resized since: idle, so nobody views it
                    m = None
                if m is None:
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
                    m = _Mapped(mm, fd, st.st_size, (st.st_dev, st.st_ino))
                    fd = -1
                    self._prune()
                    self._maps[m.ino] = m
                    self._bytes += m.size
                else:
                    self._maps.move_to_end(m.ino)
                    if m.users == 0:
                        fcntl.flock(m.fd, fcntl.LOCK_SH)
                m.users += 1
            try:
                root = np.frombuffer(m.mm, dtype=np.uint8) if m.size else np.empty(0, np.uint8)
                weakref.finalize(root, self._unuse, m)
            except BaseException:
                self._unuse(m)
                raise
            return memoryview(root)
        finally:
            if fd >= 0:
                os.close(fd)

    def _unuse(self, m):
        with self._lock:
            m.users -= 1
            if m.users:
                return
            try:
                if m.cached and _has_name(m.fd):
                    try:
                        fcntl.flock(m.fd, fcntl.LOCK_UN)
                    except OSError:
                        pass
                    self._trim()
                elif m.cached:
                    self._evict(m)       # its file is gone: keeping the mapping would only pin its memory
                else:
                    m.close()
            finally:
                segment_pool.unviewed(m.ino[1])      # (once unlocked: a settle may pool it now)

    def _evict(self, m):
        del self._maps[m.ino]
        self._bytes -= m.size
        m.cached = False
        if not m.users:
            m.close()

    def _trim(self):
        if self._bytes <= self.limit and len(self._maps) <= 4 * MAX_KEPT:
            return
        for m in [m for m in self._maps.values() if not m.users]:
            self._evict(m)
            if self._bytes <= self.limit and len(self._maps) <= 4 * MAX_KEPT:
                return

    def _prune(self):
        """Drop idle mappings of files that no longer have a name (they would pin memory)."""
        for m in [m for m in self._maps.values() if not m.users]:
            if not _has_name(m.fd):
                self._evict(m)

    def prune(self):
        with self._lock:
            self._prune()

    def clear(self):
        with self._lock:
            for m in list(self._maps.values()):
                self._evict(m)

    def _numpy(self):
        if self._np is None:
            try:
                import numpy
            except ImportError:      # pragma: no cover
                numpy = False
            self._np = numpy
        return self._np or None


def _has_name(fd) -> bool:
    try:
        return os.fstat(fd).st_nlink > 0
    except OSError:
        return False


read_maps = ReadMaps()


def map_segment(path: str) -> memoryview:
    """A read-only view of a whole segment file.

    While the view (or anything viewing it) lives, this process holds a shared lock on
    the file, so the segment pool never recycles pages it shows.
    """
    return read_maps.view(path)


def _map_once(path: str) -> memoryview:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    weakref.finalize(mm, os.close, fd)
    return memoryview(mm)


class SegmentCache:
    """Read-only mappings of segments this process reads, kept while it may read them again."""

    def __init__(self):
        self._maps = {}

    def view(self, path: str) -> memoryview:
        mv = self._maps.get(path)
        if mv is None:
            mv = map_segment(path)
            self._maps[path] = mv
        return mv

    def forget(self, path: str) -> None:
        # The mapping itself lives on while user arrays still view it.
        self._maps.pop(path, None)

    def clear(self):
        self._maps.clear()
