"""``set_trace`` that works in tasks and actors too (``ray.util.pdb``).

In a process with a terminal (the driver, or ``local_mode``) this is plain
``pdb``. A worker has no terminal, so it opens a debugger session on a
localhost TCP port, prints where, and waits for a client
(``nc 127.0.0.1 <port>`` or ``telnet``); ``continue`` closes the session.
``pdb`` and ``socket`` are imported on first use, keeping ``import util`` cheap.
"""

from __future__ import annotations

import os
import sys


def _remote_pdb(connection):
    """A ``pdb.Pdb`` talking over one accepted TCP connection."""
    import pdb

    class RemotePdb(pdb.Pdb):
        def __init__(self):
            # Separate reader and writer: one text file for both drops read-ahead input on every write.
            self._reader = connection.makefile("r", encoding="utf-8", newline="\n")
            self._writer = connection.makefile("w", buffering=1, encoding="utf-8", newline="\n")
            super().__init__(stdin=self._reader, stdout=self._writer)
            self.use_rawinput = False
            self.prompt = "(rayreact-pdb) "

        def _close(self):
            for closer in (self._reader.close, self._writer.close, connection.close):
                try:
                    closer()
                except OSError:
                    pass

        def do_continue(self, arg):
            result = super().do_continue(arg)
            self._close()
            return result

        do_c = do_cont = do_continue

        def do_quit(self, arg):
            result = super().do_quit(arg)
            self._close()
            return result

        do_q = do_exit = do_quit

    return RemotePdb()


def _has_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _debugger():
    """Local pdb with a terminal; otherwise a session on a localhost port, once a client connects."""
    if _has_terminal():
        import pdb

        return pdb.Pdb()
    import socket

    host = os.environ.get("RAY_DEBUGGER_HOST", "127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        print(f"RemotePdb session open at {host}:{port} (pid {os.getpid()}); connect with: nc {host} {port}",
              file=sys.stderr, flush=True)
        connection, _ = listener.accept()
    return _remote_pdb(connection)


def set_trace(breakpoint_uuid=None):
    """Stop in the debugger at the caller's line."""
    frame = sys._getframe().f_back
    _debugger().set_trace(frame)


def post_mortem(traceback=None):
    """Debug the traceback of the exception being handled (or ``traceback``)."""
    traceback = traceback or sys.exc_info()[2]
    debugger = _debugger()
    debugger.reset()
    debugger.interaction(None, traceback)
