"""Minimal ``setproctitle`` for Ray's test files where the real package is not installed.

Ray's tests import it (Ray once bundled it) only to read a worker's process title;
``/proc/self/cmdline`` shows the title a process set for itself.  Put on the path
by the Ray-suite runner only when ``import setproctitle`` fails.
"""


def getproctitle():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().split(b"\0\0")[0].replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def setproctitle(title):
    raise NotImplementedError("this stand-in only reads the process title")
