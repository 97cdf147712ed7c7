"""Per-process counts of live ObjectRef instances.

``ObjectRef.__del__`` may run anywhere (garbage collection, any thread, even
inside the runtime's own critical sections), so dropping the last reference
only appends the id to ``released``; the runtime drains that queue at safe
points (submission, ``get``, its service loop).  Costs nothing beyond a dict
update per ref.
"""

import collections
import threading

_lock = threading.RLock()
counts: dict = {}
released = collections.deque()


def incref(object_id: bytes) -> None:
    with _lock:
        counts[object_id] = counts.get(object_id, 0) + 1


def decref(object_id: bytes) -> None:
    with _lock:
        n = counts.get(object_id, 0) - 1
        if n > 0:
            counts[object_id] = n
            return
        counts.pop(object_id, None)
    released.append(object_id)


def unless_live(object_id: bytes, take):
    """``take()`` if no ref to ``object_id`` lives here now, else None; a ref made meanwhile (another
    thread unpickling one) waits until it has run, so what ``take`` gives back is no loan of that ref."""
    with _lock:
        if counts.get(object_id):
            return None
        return take()


def drain_released():
    out = []
    while True:
        try:
            out.append(released.popleft())
        except IndexError:
            return out


def reset():
    with _lock:
        counts.clear()
    released.clear()
