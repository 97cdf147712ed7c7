"""The zygote: a pre-imported process that forks workers fast and cleans up after the driver.

::

    driver ──stdin pipe (spawn commands)──▶ zygote ──fork──▶ worker, worker, ...
       ▲                                      │
       └──────── ring Z→driver (SPAWNED, DIED) ┘

Started once per session by ``init``.  Forking from a clean, single-threaded
process that already imported numpy/cloudpickle/rayreact makes a new worker
cost a few milliseconds instead of a fresh interpreter.  Workers die with the
zygote (``PR_SET_PDEATHSIG``); the zygote notices the driver's death as EOF on
its stdin (even after ``kill -9``) or as a new parent, then kills every worker
and removes every shared-memory file of the session.  No daemon outlives the
driver.  The zygote runs in a session of its own, so killing the driver's
process group (a terminal closing, a supervisor stopping a job) leaves it to
clean up; it and its workers hold the session lock (core.leftovers), so if all
of them are killed at once, the next ``init`` removes what they left.
"""

from __future__ import annotations

import glob
import importlib
import os
import pickle
import select
import signal
import struct
import sys

from rayreact.core.libc import libc

_LEN = struct.Struct("<I")
PR_SET_PDEATHSIG = 1
PARENT_CHECK_SECONDS = 1.0
SETUP_HOOKS_VAR = "RAYREACT_WORKER_SETUP"   # "module:function,...": called in each worker before any user code


def set_parent_death_signal(sig=signal.SIGKILL):
    try:
        libc().prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def encode_command(cmd) -> bytes:
    data = pickle.dumps(cmd, protocol=5)
    return _LEN.pack(len(data)) + data


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def cleanup_session(config):
    lock = config.get("session_lock")
    for pattern in config["cleanup_globs"]:
        for path in glob.glob(pattern):
            if path != lock:
                try:
                    os.unlink(path)
                except OSError:
                    pass
    if lock:
        try:
            os.unlink(lock)        # last: until now a sweeper sees the session as alive
        except OSError:
            pass
    for d in config.get("cleanup_dirs", ()):
        try:
            os.rmdir(d)
        except OSError:
            pass


def main():
    config = pickle.loads(bytes.fromhex(sys.argv[1]))
    sys.path[:] = config["sys_path"]
    os.chdir(config["cwd"])
    # Preload what every worker needs, so forks start warm.
    import cloudpickle  # noqa: F401
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    from rayreact.core import channel, protocol, worker
    # Start-up hooks the driver's layers above the core registered (``rayreact run`` aliases ``ray``: code
    # pickled there says "import ray"); named in the environment, so the core imports nothing above it.
    for hook in filter(None, os.environ.get(SETUP_HOOKS_VAR, "").split(",")):
        module, _, function = hook.partition(":")
        getattr(importlib.import_module(module), function)()
    for mod in config.get("preload", ()):
        try:
            __import__(mod)
        except Exception:
            pass

    driver_pid = config.get("driver_pid") or os.getppid()
    notices = channel.Ring(config["zygote_ring"])
    notices.reader_bell = channel.Doorbell(config["driver_bell"])
    children = {}
    cmd_fd = sys.stdin.fileno()

    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def notify(msg):
        try:
            notices.write(protocol.dumps(msg), 5.0)
        except Exception:
            pass

    def reap():
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.pop(pid, None)
            notify((protocol.DIED, pid, status))

    while True:
        try:
            # A child the driver forked may hold our stdin open after the driver died: check the parent too.
            readable, _, _ = select.select([cmd_fd, rfd], [], [], PARENT_CHECK_SECONDS)
        except InterruptedError:
            continue
        if os.getppid() != driver_pid:
            break
        if rfd in readable:
            try:
                os.read(rfd, 4096)
            except BlockingIOError:
                pass
            reap()
        if cmd_fd not in readable:
            continue
        head = _read_exact(cmd_fd, _LEN.size)
        cmd = None if head is None else pickle.loads(_read_exact(cmd_fd, _LEN.unpack(head)[0]))
        if cmd is None or cmd[0] == "shutdown":
            break
        if cmd[0] == "spawn":
            spec = cmd[1]
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(cmd_fd)
                    os.close(rfd)
                    os.close(wfd)
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    set_parent_death_signal()
                    worker.run_forked(spec)
                finally:
                    os._exit(0)
            children[pid] = spec["worker_index"]
            notify((protocol.SPAWNED, spec["worker_index"], pid))
        elif cmd[0] == "kill":
            try:
                os.kill(cmd[1], signal.SIGKILL)
            except ProcessLookupError:
                pass

    # The driver has gone (EOF) or asked us to stop: nothing of the session may remain.
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in list(children):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    cleanup_session(config)


if __name__ == "__main__":
    main()
