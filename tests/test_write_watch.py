"""The kernel's record of written pages (core.write_watch), which lets the snapshot cache skip comparisons.

A rayreact-internal unit: what it reports must cover every change, and anything it cannot
vouch for must come back as "not known" (None), never as "unchanged".
"""

import ctypes
import mmap
import os

import numpy as np
import pytest

from rayreact.core.write_watch import PAGE, write_watch

pytestmark = pytest.mark.skipif(not write_watch.available(),
                                reason="this kernel or sandbox refuses asynchronous userfaultfd write protection")


def covered(spans, offset):
    return any(at <= offset < at + n for at, n in spans)


@pytest.fixture
def watched_array():
    arr = np.ones(1_000_000)
    w = write_watch.watch(arr.ctypes.data, arr.nbytes)
    assert w is not None
    yield arr, w
    write_watch.unwatch(w)


def test_only_the_partial_end_pages_are_listed_before_any_write(watched_array):
    arr, w = watched_array
    spans = write_watch.changed(w)
    assert sum(n for _, n in spans) < 2 * PAGE
    assert covered(spans, 0) == (arr.ctypes.data % PAGE != 0)


def test_a_write_is_listed_once_then_protected_again(watched_array):
    arr, w = watched_array
    write_watch.changed(w)
    arr[500_000] = 2.0
    spans = write_watch.changed(w)
    assert covered(spans, 500_000 * 8)
    assert not covered(write_watch.changed(w), 500_000 * 8)


def test_a_write_by_the_kernel_is_listed(watched_array, tmp_path):
    arr, w = watched_array
    write_watch.changed(w)
    (tmp_path / "src").write_bytes(b"x" * 64)
    with open(tmp_path / "src", "rb") as f:
        f.readinto(memoryview(arr).cast("B")[300_000 * 8:300_000 * 8 + 64])
    assert covered(write_watch.changed(w), 300_000 * 8)


def test_overlapping_ranges_are_refused(watched_array):
    arr, w = watched_array
    assert write_watch.watch(arr.ctypes.data + 100 * PAGE, 10 * PAGE) is None


def test_an_unwatched_or_remapped_range_is_not_known():
    mem = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = np.frombuffer(mem, dtype=np.uint8).ctypes.data
    w = write_watch.watch(addr, 64 * PAGE)
    write_watch.unwatch(w)
    assert write_watch.changed(w) is None
    w = write_watch.watch(addr, 64 * PAGE)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fixed = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10            # MAP_FIXED: new memory, same address
    assert libc.mmap(addr + 8 * PAGE, 8 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE, fixed, -1, 0) == addr + 8 * PAGE
    assert write_watch.changed(w) is None
    write_watch.unwatch(w)


def test_a_forked_child_knows_nothing_of_its_parents_watches(watched_array):
    arr, w = watched_array
    pid = os.fork()
    if pid == 0:
        os._exit(0 if write_watch.changed(w) is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_range_freed_since_does_not_block_a_new_watch():
    mem = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = np.frombuffer(mem, dtype=np.uint8).ctypes.data
    old = write_watch.watch(addr, 64 * PAGE)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fixed = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10
    assert libc.mmap(addr, 64 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE, fixed, -1, 0) == addr
    ctypes.memset(addr, 1, 64 * PAGE)                          # present pages: absent ones are always listed
    new = write_watch.watch(addr + 16 * PAGE, 16 * PAGE)      # overlaps the stale range
    assert new is not None
    assert write_watch.changed(old) is None
    assert write_watch.changed(new) == []
    write_watch.unwatch(old)                                   # the stale watcher lets go: the new one stays
    assert write_watch.changed(new) == []
    write_watch.unwatch(new)
