"""``multiprocessing``-compatible process pool built on actors (``ray.util.multiprocessing``)."""

from multiprocessing import JoinableQueue, TimeoutError

from .pool import Pool

__all__ = ["Pool", "TimeoutError", "JoinableQueue"]
