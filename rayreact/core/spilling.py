"""``object_store_memory``: values past the limit live in files on disk (spilled), as in Ray.

::

    writer (driver put, task argument, a worker's result)
        │  directory_for(size): does used + size fit the limit?
        ├── yes ─► <shm dir>/rr-<session>-...     shared memory, counted in ``used``
        └── no ──► <spill dir>/rr-<session>-...   a private directory in the temp dir
                                                  (page cache: the kernel writes it out
                                                  and evicts it instead of pinning RAM)

The driver's object table (core.objects) counts the bytes of objects held in
shared memory (its ``shared_memory_used`` is this module's ``used``) and publishes
the count in its doorbell page (``channel.publish_store_used``); workers read it
there.  Readers map either kind of file the same way, so a spilled value
reads back like any other (zero-copy, read-only).  Ray spills lazily and restores
on demand; here a value is written where it will stay, which needs no restore.

The bound holds up to the values being written at the same moment by different
processes (each checks the published count before writing).  Arguments passed by
value are placed by the same rule but, being freed when their call ends, are not
counted.  If the spill directory cannot take the value either, the write fails
with ``ObjectStoreFullError`` naming the sizes.
"""

from __future__ import annotations

import os

from .. import exceptions


class Spilling:
    """Where the next segment of this process goes (configured once per process)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.shm_dir = None
        self.spill_dir = None           # None: nowhere to spill (the shared directory is already on disk)
        self.limit = 0
        self._used = _nothing_used

    def configure(self, shm_dir, spill_dir, limit, used):
        self.shm_dir, self.spill_dir, self.limit, self._used = shm_dir, spill_dir, int(limit), used

    def used(self) -> int:
        return self._used()

    def directory_for(self, size: int) -> str:
        if self.spill_dir is None or self._used() + size <= self.limit:
            return self.shm_dir
        return self.spill_dir

    def is_spilled(self, path: str) -> bool:
        return self.spill_dir is not None and os.path.dirname(path) == self.spill_dir

    def write(self, ser, name: str, directory=None) -> str:
        """Write ``ser``'s pack as ``name`` in ``directory``, by default the one its size calls for; the path."""
        path = os.path.join(directory or self.directory_for(ser.size), name)
        try:
            ser.write_segment(path)
        except OSError as exc:
            raise exceptions.ObjectStoreFullError(
                f"Failed to store an object of {ser.size} bytes: shared memory holds {self._used()} of its "
                f"{self.limit} bytes (init(object_store_memory=...)) and writing it to "
                f"{os.path.dirname(path)} failed: {exc}") from exc
        return path


def _nothing_used():
    return 0


spilling = Spilling()
