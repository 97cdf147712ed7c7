"""The C library, loaded once, for the few calls the os module lacks (prctl, tgkill, memcmp)."""

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=None)
def libc():
    """The process' libc (errno kept for callers that check it); raises OSError where there is none."""
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
