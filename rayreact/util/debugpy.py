"""``set_trace`` for the VS Code debugger (``ray.util.ray_debugpy``); needs the ``debugpy`` package."""

from __future__ import annotations

import os
import sys

_DEFAULT_PORT = 5678


def set_trace(breakpoint_uuid=None):
    """Wait for a debugpy client on ``RAY_DEBUGPY_PORT`` (default 5678) of localhost, then break."""
    try:
        import debugpy
    except ImportError as e:
        raise ImportError("ray_debugpy.set_trace needs the 'debugpy' package: pip install debugpy") from e
    port = int(os.environ.get("RAY_DEBUGPY_PORT", _DEFAULT_PORT))
    if not debugpy.is_client_connected():
        debugpy.listen(("127.0.0.1", port))
        print(f"Waiting for a debugpy client on 127.0.0.1:{port} (pid {os.getpid()})", file=sys.stderr, flush=True)
        debugpy.wait_for_client()
    debugpy.breakpoint()
