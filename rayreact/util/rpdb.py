"""``set_trace`` that works in tasks and actors too (``ray.util.pdb``).

In a process with a terminal (the driver, or ``local_mode``) this is plain
``pdb``. A worker has no terminal, so it opens a debugger session on a
localhost TCP port, prints where, and waits for a client
(``nc 127.0.0.1 <port>`` or ``telnet``); ``continue`` closes the session.
"""

from __future__ import annotations

import os
import pdb
import socket
import sys


class _RemotePdb(pdb.Pdb):
    """pdb talking over one accepted TCP connection."""

    def __init__(self, connection: socket.socket):
        self._connection = connection
        self._stream = connection.makefile("rw", buffering=1, encoding="utf-8", newline="\n")
        super().__init__(stdin=self._stream, stdout=self._stream)
        self.use_rawinput = False
        self.prompt = "(rayreact-pdb) "

    def _close(self):
        for closer in (self._stream.close, self._connection.close):
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


def _has_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _open_remote_session() -> _RemotePdb:
    host = os.environ.get("RAY_DEBUGGER_HOST", "127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        print(f"RemotePdb session open at {host}:{port} (pid {os.getpid()}); connect with: nc {host} {port}",
              file=sys.stderr, flush=True)
        connection, _ = listener.accept()
    return _RemotePdb(connection)


def set_trace(breakpoint_uuid=None):
    """Stop in the debugger at the caller's line."""
    frame = sys._getframe().f_back
    debugger = pdb.Pdb() if _has_terminal() else _open_remote_session()
    debugger.set_trace(frame)


def post_mortem(traceback=None):
    """Debug the traceback of the exception being handled (or ``traceback``)."""
    traceback = traceback or sys.exc_info()[2]
    debugger = pdb.Pdb() if _has_terminal() else _open_remote_session()
    debugger.reset()
    debugger.interaction(None, traceback)
