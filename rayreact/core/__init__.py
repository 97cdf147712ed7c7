"""The machine room: runtime, workers, channels, objects, and the reactor (record / infer / replay).

``rayreact.core.IMPLEMENTATION`` names the channel implementation in use ("cython"); the
compiled extension is required (CI fails without it) and there is no silent fallback.
"""

import sys as _sys

if not _sys.platform.startswith("linux"):
    # Futex doorbells, userfaultfd, /proc and parent-death signals: the runtime is Linux's.
    raise ImportError(f"rayreact runs on Linux only (this is {_sys.platform}); on other systems use Ray itself")


def __getattr__(name):
    if name == "IMPLEMENTATION":
        from .channel import IMPLEMENTATION
        return IMPLEMENTATION
    raise AttributeError(f"module 'rayreact.core' has no attribute '{name}'")
