"""Which pages of a memory range were written since we last looked (Linux >= 6.7).

The snapshot cache (``snapshots``) proves that an array passed again is unchanged by
comparing it byte for byte with the segment it was written to: 8 ms for 128 MB, paid
at every call.  The kernel can keep that record for free instead.  A range registered
with a userfaultfd in *asynchronous write-protect* mode has its pages write-protected;
the first write to a page after that clears the page's protection inside the kernel
(no handler thread, no signal), whether the write comes from user code or from the
kernel on the process' behalf (``readinto``, ``preadv``).  ``PAGEMAP_SCAN`` then lists
the pages whose protection is gone and protects them again, in one call:

    watch(addr, n)      register [addr, addr + n) and write-protect it
    changed(watched)    pages that may differ since the last look, protected again
    unwatch(watched)    forget the range

``changed`` is conservative: besides written pages it reports every page that is not
plainly private memory this process alone can change, i.e. pages that are shared
or file-backed (another process may write them), absent (dropped by ``madvise``,
reading as zeros), the zero page or swapped out.  A range that stopped being
watched (unmapped, remapped, ``fork``'s child) is an error, never "unchanged".

Where the kernel or a sandbox refuses any of this, ``available()`` is False and the
caller compares bytes as before.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

from .libc import libc

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

_SYS_USERFAULTFD = {"x86_64": 323, "aarch64": 282}.get(platform.machine())


def _ioc(direction, kind, number, size):
    return (direction << 30) | (size << 16) | (kind << 8) | number


_READ, _WRITE = 2, 1
_UFFDIO_API = _ioc(_READ | _WRITE, 0xAA, 0x3F, 24)
_UFFDIO_REGISTER = _ioc(_READ | _WRITE, 0xAA, 0x00, 32)
_UFFDIO_UNREGISTER = _ioc(_READ, 0xAA, 0x01, 16)
_UFFDIO_WRITEPROTECT = _ioc(_READ | _WRITE, 0xAA, 0x06, 24)
_PAGEMAP_SCAN = _ioc(_READ | _WRITE, ord("f"), 16, 96)

_UFFD_API = 0xAA
_UFFD_USER_MODE_ONLY = 1           # all that unprivileged users may ask for; asynchronous protection needs no more
_FEATURE_WP_UNPOPULATED = 1 << 13  # pages not yet populated are protected too
_FEATURE_WP_ASYNC = 1 << 15        # the kernel resolves write faults itself
_REGISTER_MODE_WP = 1 << 1
_WRITEPROTECT_MODE_WP = 1 << 0

_SCAN_WP_MATCHING = 1 << 0         # protect again what the scan reports
_SCAN_CHECK_WPASYNC = 1 << 1       # fail on a range not registered in asynchronous mode
_IS_WRITTEN, _IS_FILE, _IS_PRESENT, _IS_SWAPPED, _IS_PFNZERO = 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
_SUSPECT = _IS_WRITTEN | _IS_FILE | _IS_PRESENT | _IS_SWAPPED | _IS_PFNZERO   # "present" inverted: absent

_REGIONS = 64


class Watched:
    """A watched range: ``[start, end)`` are the whole pages inside the caller's buffer."""

    __slots__ = ("addr", "nbytes", "start", "end")

    def __init__(self, addr, nbytes, start, end):
        self.addr, self.nbytes = addr, nbytes
        self.start, self.end = start, end


class _WriteWatch:
    def __init__(self):
        self._lock = threading.Lock()
        self._fds = None                # (userfaultfd, /proc/self/pagemap), opened on first use
        self._pid = None
        self._ranges = {}               # start -> the Watched of each watched range (they never overlap)
        self._failed = False

    def available(self) -> bool:
        return self._open() is not None

    def _open(self):
        if self._pid != os.getpid():    # a forked child: the parent's registrations are not its own
            self._fds, self._ranges, self._failed, self._pid = None, {}, False, os.getpid()
        if self._fds is None and not self._failed:
            with self._lock:
                if self._fds is None and not self._failed:
                    self._fds = self._try_open()
                    self._failed = self._fds is None
        return self._fds

    @staticmethod
    def _try_open():
        if _SYS_USERFAULTFD is None or os.environ.get("RAYREACT_WRITE_WATCH", "1") == "0":
            return None
        try:
            c = libc()
            c.syscall.restype = ctypes.c_long
            uffd = c.syscall(_SYS_USERFAULTFD, os.O_CLOEXEC | os.O_NONBLOCK | _UFFD_USER_MODE_ONLY)
            if uffd < 0:
                return None
            api = (ctypes.c_uint64 * 3)(_UFFD_API, _FEATURE_WP_ASYNC | _FEATURE_WP_UNPOPULATED, 0)
            if c.ioctl(uffd, ctypes.c_ulong(_UFFDIO_API), api) != 0:
                os.close(uffd)
                return None
            pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return uffd, pagemap

    def watch(self, addr: int, nbytes: int):
        """Start watching the buffer ``[addr, addr + nbytes)``: a ``Watched``, or None if it cannot be."""
        fds = self._open()
        start, end = (addr + PAGE - 1) & ~(PAGE - 1), (addr + nbytes) & ~(PAGE - 1)
        if fds is None:
            return None
        if end <= start:                # no whole page inside: nothing to watch, all of it to compare
            return Watched(addr, nbytes, start, start)
        with self._lock:
            for s, other in [(s, w) for s, w in self._ranges.items() if s < end and start < w.end]:
                # Protecting a live range again would wipe its watcher's record of what was written;
                # one whose memory was unmapped since is stale, and its watcher will find it gone.
                if self._registered(fds[1], s, other.end):
                    return None
                del self._ranges[s]
            watched = self._ranges[start] = Watched(addr, nbytes, start, end)
        c = libc()
        register = (ctypes.c_uint64 * 4)(start, end - start, _REGISTER_MODE_WP, 0)
        protect = (ctypes.c_uint64 * 3)(start, end - start, _WRITEPROTECT_MODE_WP)
        if c.ioctl(fds[0], ctypes.c_ulong(_UFFDIO_REGISTER), register) != 0:
            self._forget(watched)
            return None
        if c.ioctl(fds[0], ctypes.c_ulong(_UFFDIO_WRITEPROTECT), protect) != 0:
            self.unwatch(watched)
            return None
        return watched

    @staticmethod
    def _registered(pagemap, start, end) -> bool:
        """Whether all memory mapped in [start, end) is still registered here (a scan that reports nothing)."""
        probe = (ctypes.c_uint64 * 12)(96, _SCAN_CHECK_WPASYNC, start, end, 0, 0, 0, 0,
                                       _IS_PRESENT, _IS_FILE | _IS_PRESENT, 0, _IS_FILE)   # absent file pages: none
        return libc().ioctl(pagemap, ctypes.c_ulong(_PAGEMAP_SCAN), probe) >= 0

    def changed(self, watched):
        """[(offset, length)] in the buffer that may have changed since the last look, or None if not known.

        The partial pages at either end are always listed: bytes there are not watched."""
        if watched.end == watched.start:
            return [(0, watched.nbytes)]
        fds = self._open()
        if fds is None or self._ranges.get(watched.start) is not watched:
            return None
        spans = []
        if watched.start > watched.addr:
            spans.append((0, watched.start - watched.addr))
        regions = (ctypes.c_uint64 * (3 * _REGIONS))()
        at = watched.start
        while at < watched.end:
            scan = (ctypes.c_uint64 * 12)(
                96, _SCAN_WP_MATCHING | _SCAN_CHECK_WPASYNC, at, watched.end, 0,
                ctypes.addressof(regions), _REGIONS, 0,
                _IS_PRESENT, 0, _SUSPECT, _SUSPECT)
            found = libc().ioctl(fds[1], ctypes.c_ulong(_PAGEMAP_SCAN), scan)
            if found < 0:
                return None
            for i in range(found):
                lo, hi = regions[3 * i], regions[3 * i + 1]
                spans.append((lo - watched.addr, hi - lo))
            if scan[4] <= at:           # no progress: do not trust the walk
                return None
            at = scan[4]
        tail = watched.addr + watched.nbytes
        if tail > watched.end:
            spans.append((watched.end - watched.addr, tail - watched.end))
        return spans

    def unwatch(self, watched) -> None:
        fds = self._open()
        if fds is None or watched.end == watched.start or self._ranges.get(watched.start) is not watched:
            return
        span = (ctypes.c_uint64 * 2)(watched.start, watched.end - watched.start)
        libc().ioctl(fds[0], ctypes.c_ulong(_UFFDIO_UNREGISTER), span)   # fails harmlessly if unmapped since
        self._forget(watched)

    def _forget(self, watched):
        with self._lock:
            if self._ranges.get(watched.start) is watched:
                del self._ranges[watched.start]


write_watch = _WriteWatch()
