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

import gc
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
    channel, wire, worker = _import_worker_modules()
    _run_setup_hooks(config)
    # What is imported now lives as long as every worker: out of the cycle collector's sight, a worker's
    # full collections neither walk it (torch alone is some 10^5 objects) nor, by writing its headers,
    # copy every page of it out of the zygote's memory (a stall of 0.1-0.3 s the first time).
    gc.collect()                    # (garbage of the imports is not kept for good)
    gc.freeze()
    zygote = _Zygote(config, channel, wire, worker)
    zygote.serve()
    # The driver has gone (EOF) or asked us to stop: nothing of the session may remain.
    zygote.kill_children()
    cleanup_session(config)


def _import_worker_modules():
    """Preload what every worker needs, so forks start warm; returns the core modules the zygote uses."""
    importlib.import_module("cloudpickle")
    try:
        importlib.import_module("numpy")
    except ImportError:
        pass
    from rayreact.core import channel, wire, worker
    return channel, wire, worker


def _run_setup_hooks(config):
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


class _Zygote:
    """The fork server: its command pipe, the self-pipe SIGCHLD wakes it through, the workers it forked."""

    def __init__(self, config, channel, wire, worker):
        self.wire = wire
        self.worker = worker
        self.driver_pid = config.get("driver_pid") or os.getppid()
        self.notices = channel.Ring(config["zygote_ring"])
        self.notices.reader_bell = channel.Doorbell(config["driver_bell"])
        self.children = {}
        self.cmd_fd = sys.stdin.fileno()
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.wfd, False)
        signal.set_wakeup_fd(self.wfd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def serve(self):
        """Run the driver's commands until it goes away or asks for a shutdown."""
        cmd_fd, rfd = self.cmd_fd, self.rfd
        while True:
            try:
                # A child the driver forked may hold our stdin open after the driver died: check the parent too.
                readable, _, _ = select.select([cmd_fd, rfd], [], [], PARENT_CHECK_SECONDS)
            except InterruptedError:
                continue
            if os.getppid() != self.driver_pid:
                return
            if rfd in readable:
                try:
                    os.read(rfd, 4096)
                except BlockingIOError:
                    pass
                self.reap()
            if cmd_fd not in readable:
                continue
            cmd = self.read_command()
            if cmd is None or cmd[0] == "shutdown":
                return
            if cmd[0] == "spawn":
                self.spawn(cmd[1])
            elif cmd[0] == "kill":
                try:
                    os.kill(cmd[1], signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def read_command(self):
        """The driver's next command; None at EOF (the driver has gone)."""
        head = _read_exact(self.cmd_fd, _LEN.size)
        return None if head is None else pickle.loads(_read_exact(self.cmd_fd, _LEN.unpack(head)[0]))

    def notify(self, msg):
        try:
            self.notices.write(self.wire.encode(msg), 5.0)
        except Exception:
            pass

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.pop(pid, None)
            self.notify(self.wire.Died(pid, status))

    def spawn(self, spec):
        pid = os.fork()
        if pid == 0:
            try:
                self._become_worker(spec)
            finally:
                os._exit(0)
        self.children[pid] = spec["worker_index"]
        self.notify(self.wire.Spawned(spec["worker_index"], pid))

    def _become_worker(self, spec):
        # In the fork: drop the zygote's pipes and signal set-up, and die with the zygote.
        os.close(self.cmd_fd)
        os.close(self.rfd)
        os.close(self.wfd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        set_parent_death_signal()
        self.worker.run_forked(spec)

    def kill_children(self):
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


if __name__ == "__main__":
    main()
