"""Worker results without a copy: a large array a call made is handed over in the file it was born in.

::

    call: np.array(x) ──► arena slot: pages of rr-<session>-slot-<pid>-<n>, mapped here (core.arena)
    store_value(result) ──► claim: the result's one large buffer lies in a slot; the pack's
                            header and in-band pickle go into the slot's first page
    (the call's own references to the result go)
    commit, before the result is reported:
        the array died with them ──► rename the file to the result's name: no copy
        something still holds it ──► copy the pack into a segment, as without slots
                                     (the worker may change the array; the snapshot may not)
    refill, after the report: a file of the size just used (from the session's pool if it
                              has one) becomes a FREE slot for the next call

A claimed file is never written by this process again: the slot leaves the table
when the array dies, and the kept writable mapping (``segment_pool.written``) is
used only after the file comes back through the pool.  Only results of calls run
on the worker's main thread are claimed (numpy's handler is per thread), and only
while the value fits in shared memory (``core.spilling``).
"""

from __future__ import annotations

import glob
import os
import sys
import threading
import time

from .segments import PAGE, address_of, create_writable, page_round, segment_pool
from .spilling import spilling

MIN_BYTES = 1 << 20                   # smaller arrays: one copy costs less than the bookkeeping
MAX_BYTES = 64 << 20                  # larger ones: a slot pins that much per worker between calls
MAX_FREE_SLOTS = 1
IDLE_SECONDS = 10.0                    # a worker idle this long gives its free slots back


class Handoff:
    """One per worker process."""

    def __init__(self):
        self.enabled = os.environ.get("RAYREACT_HANDOFF", "1") != "0"
        self.arena = None
        self.directory = None
        self.session = None
        self._thread = None
        self._slots = {}              # slot index -> (path, Writable)
        self._pending = []            # (slot index, result path, pack end) claimed, not yet committed
        self._want = 0                # data bytes the next call will probably allocate
        self._counter = 0
        self._active = 0.0            # when a slot was last added
        self.handed = 0               # results handed over without a copy
        self.copied = 0               # claimed results the worker still held: copied

    def start(self, directory, session):
        self.directory, self.session = directory, session

    def ready(self):
        """Before a call on the main thread: install the allocator once numpy is loaded."""
        if self.arena is not None or not self.enabled or self.directory is None or "numpy" not in sys.modules \
                or threading.current_thread() is not threading.main_thread():
            return
        try:
            from . import arena
            arena.install(MIN_BYTES)
        except Exception:            # noqa: BLE001 - no slots: results are copied as before
            self.enabled = False
            return
        self.arena = arena
        self._thread = threading.get_ident()
        # A child forked by user code must not allocate from files its parent still uses.
        os.register_at_fork(after_in_child=arena.forget_all)

    # ------------------------------------------------------------------ claim / commit
    def claim(self, ser, path) -> bool:
        """``ser``'s pack will be the slot's file, renamed to ``path`` at ``commit``; False if it cannot be."""
        arena = self.arena
        buffers = getattr(ser, "buffers", ())        # (the reactor's Packed values have none)
        if arena is None or len(buffers) != 1 or ser.is_error or threading.get_ident() != self._thread:
            return False
        buf = buffers[0]
        n = buf.nbytes
        if not MIN_BYTES <= n <= MAX_BYTES:
            return False
        address = address_of(buf)
        index = arena.claim(address, n)
        if index < 0:
            return False
        file_path, w = self._slots[index]
        offset = arena.RESERVE + address - arena.data_address(index)
        head = ser.head_for([(offset, n)])
        if len(head) > arena.RESERVE or offset + n > w.size:
            arena.settle(index)      # does not fit the slot's first page: copied as usual
            return False
        dst = memoryview(w.mm)
        try:
            dst[:len(head)] = head
        finally:
            del dst
        self._pending.append((index, path, offset + n))
        self._want = max(n, MIN_BYTES)
        return True

    def commit(self):
        """Before reporting results: hand over every claimed file whose array died; copy the others."""
        if not self._pending or threading.get_ident() != self._thread:
            return
        pending, self._pending = self._pending, []
        for index, path, end in pending:
            file_path, w = self._slots[index]
            if self.arena.settle(index):
                del self._slots[index]
                os.rename(file_path, path)
                segment_pool.written(w)          # reused, by inode, only once the file comes back to us
                self.handed += 1
            else:
                _copy_out(w, end, path)
                self.copied += 1

    # ------------------------------------------------------------------ slots
    def refill(self):
        """After reporting: make sure a FREE slot fits what the last calls allocated."""
        arena = self.arena
        if arena is None or threading.get_ident() != self._thread:
            return
        want = max(arena.take_miss(), self._want)
        self._want = 0
        if not MIN_BYTES <= want <= MAX_BYTES or spilling.directory_for(2 * want) != self.directory:
            return                   # (near) the object store's limit: no pages held in reserve
        free = arena.free_capacities()
        if any(want <= cap <= want + want // 2 + PAGE for cap in free.values()):
            return
        for index in sorted(free, key=lambda i: free[i])[:max(0, len(free) + 1 - MAX_FREE_SLOTS)]:
            self._drop(index)
        self._counter += 1
        file_path = os.path.join(self.directory, f"rr-{self.session}-slot-{os.getpid()}-{self._counter}")
        size = arena.RESERVE + want
        # A pooled file first (its pages exist); else fresh pages, allocated now (a full /dev/shm is then
        # an error here, not a SIGBUS in the next call).  Slots are capped at MAX_BYTES: for bigger values,
        # fresh pages for every worker at once cost more than the copies they would save.
        w = segment_pool.take(file_path, size) or create_writable(file_path, page_round(size))
        if w is None:
            return
        index = arena.add_slot(address_of(memoryview(w.mm)), w.size - arena.RESERVE)
        if index < 0:
            w.close()
            _unlink(file_path)
            return
        self._slots[index] = (file_path, w)
        self._active = time.monotonic()

    def idle(self):
        """From the worker's idle loop: free slots unused for a while go back to the system."""
        if self._slots and time.monotonic() - self._active > IDLE_SECONDS \
                and threading.get_ident() == self._thread:
            for index in self.arena.free_capacities():
                self._drop(index)

    def _drop(self, index):
        if self.arena.drop(index):
            file_path, w = self._slots.pop(index)
            w.close()
            _unlink(file_path)

    def clear(self):
        if self.arena is None:
            return
        for index in list(self._slots):
            self._drop(index)


def remove_slot_files(prefix, pid):
    """(Driver) the slot files of a worker that exited: never handed over, never read."""
    for path in glob.glob(f"{glob.escape(prefix)}-slot-{pid}-*"):
        _unlink(path)


def _copy_out(w, end, path):
    """The pack in ``w``'s first ``end`` bytes, copied into a segment file ``path`` (the snapshot)."""
    out = segment_pool.take(path, end) or create_writable(path, page_round(end))
    if out is None:
        raise OSError(f"could not create the segment {path}")
    src = memoryview(w.mm)[:end]
    try:
        memoryview(out.mm)[:end] = src
    finally:
        src.release()
    segment_pool.written(out)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


handoff = Handoff()
