"""Process titles like Ray's (``ray::IDLE``, ``ray::f``, ``ray::Actor``, ``ray::Actor.method``), no C helper needed.

Two places show a title.  ``/proc/<pid>/cmdline`` (what ``ps -o args`` and
``pgrep -f`` read) is the process's original argv memory: we overwrite it in
place through a memoryview, padded with NULs, as setproctitle does.  Python
keeps its own copy of argv, so ``sys.argv`` is unaffected; the title can be as
long as the original command line (a worker's is the zygote's, which carries
its whole config, so room is ample).  ``comm`` (``ps -o comm``, ``top``) is the
calling thread's name, 15 bytes at most, set with ``prctl(PR_SET_NAME)``; as
with Ray's setproctitle, a call running on another thread renames that thread
only.  The command line costs a memory copy (well under a microsecond);
``comm`` a system call, which callers on an actor's per-call path skip.
"""

from __future__ import annotations

import ctypes

PR_SET_NAME = 15
_COMM_MAX = 15

_view = None          # writable memoryview of this process's argv memory; False where it cannot be found
_dirty = 0            # how many leading bytes of it are not NUL (all of them at first: the command line)
_prctl = None


def _argv_view():
    """The argv area (arg_start and arg_end, fields 48 and 49 of /proc/self/stat), as a writable memoryview."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])
    except (OSError, IndexError, ValueError):
        return False
    if not 0 < start < end:
        return False
    return memoryview((ctypes.c_char * (end - start)).from_address(start)).cast("B")


def _setup():
    global _view, _dirty, _prctl
    _view = _argv_view()
    _dirty = len(_view) if _view else 0
    try:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = False


def encode(title: str) -> bytes:
    """A title as ``set_title`` takes it (encode once, set often)."""
    return title.encode("utf-8", "replace")


def set_title(title: bytes, comm: bool = True) -> None:
    """Show ``title`` as this process's command line and, with ``comm``, as the calling thread's name."""
    global _dirty
    if _view is None:
        _setup()
    if _view:
        n = len(title)
        if n >= len(_view):
            n = len(_view) - 1               # the last byte stays NUL: the kernel then shows exactly this area
            title = title[:n]
        _view[:n] = title
        if _dirty > n:
            _view[n:_dirty] = bytes(_dirty - n)
        _dirty = n
    if comm and _prctl:
        _prctl(PR_SET_NAME, title[:_COMM_MAX], 0, 0, 0)
