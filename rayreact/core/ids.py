"""Unique ids for objects, tasks and actors: a per-process random prefix plus a counter.

Any process may mint ids without asking the driver, which keeps ``.remote()``
free of round trips in workers too.
"""

import hashlib
import itertools
import os

_PREFIX = os.urandom(12)
_counter = itertools.count(1)


def reseed():
    """Give a freshly forked process its own prefix."""
    global _PREFIX, _counter
    _PREFIX = os.urandom(12)
    _counter = itertools.count(1)


def new_id(size: int = 28) -> bytes:
    """A fresh id; 28 bytes like Ray's ObjectID (56 hex digits)."""
    return (_PREFIX + next(_counter).to_bytes(16, "little"))[:size]


def actor_id() -> bytes:
    return new_id(16)


def task_id() -> bytes:
    return new_id(24)


def tag64(some_id: bytes) -> int:
    """A nonzero 64-bit tag of an id, the same in every process (a shared-memory word can name the id)."""
    return int.from_bytes(hashlib.blake2b(some_id, digest_size=8).digest(), "little") or 1
