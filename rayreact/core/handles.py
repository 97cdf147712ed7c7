"""Actor handles are counted as references, with the same machinery as ObjectRefs.

Every ActorHandle instance counts once, in its process's ``refcount``, under a
*handle key* derived from its actor id.  A handle pickled into a value is noted
as a ref nested in that value, so the driver's object table tracks it exactly
like a nested ObjectRef: containers hold it (``holds``), workers that unpickle it
borrow it (``borrowers``, given back by their batched RELEASE messages), and the
driver's own instances count locally.  The driver keeps one object-table entry
per actor under this key; when that entry is freed, no handle exists anywhere
(driver, tasks, actors, values in flight) and an unnamed, non-detached actor
finishes its queued calls and exits, as in Ray.
"""

_PREFIX = b"actor-handle:"
_KEY_LENGTH = len(_PREFIX) + 16          # actor ids are 16 bytes; object ids are 28, so keys never clash


def key_of(actor_id: bytes) -> bytes:
    return _PREFIX + actor_id


def is_key(object_id: bytes) -> bool:
    return len(object_id) == _KEY_LENGTH and object_id.startswith(_PREFIX)


def actor_of(key: bytes) -> bytes:
    return key[len(_PREFIX):]


_handle_class = None


def serve_handles_with(handle_class):
    """The facade's ActorHandle class: the core builds every handle through :func:`new_handle`."""
    global _handle_class
    _handle_class = handle_class


def new_handle(*args, **kwargs):
    return _handle_class(*args, **kwargs)
