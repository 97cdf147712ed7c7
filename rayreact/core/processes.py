"""Worker processes as the driver sees them: the zygote that forks them, their rings, sending to them, signals.

::

    Runtime ──spawn()──▶ zygote (stdin commands) ──fork──▶ worker
       │                    └── ring Z→D: SPAWNED / DIED (the runtime's pump reads it, calls spawned()/died())
       ├──send()──▶ ring D→W, or ``w.outbox`` while the ring is full (flush_outboxes() when space frees)
       └── log pipes ◀── the zygote's and every worker's fds 1 and 2 (core.worker_logs prints them)

The runtime's pump reads every worker's ring W→D and the zygote ring through ``poller``, which this
module keeps set to the live rings.  Nothing here takes decisions about tasks or actors: the task pool
and the actor table (core.task_pool, core.actors) spawn and message workers through these methods, under
the runtime's lock (every method expects it held unless its docstring says otherwise).
"""

from __future__ import annotations

import collections
import errno
import os
import resource
import signal
import subprocess
import sys

from . import channel, leftovers, wire, worker_logs
from .handoff import remove_slot_files
from .libc import libc

RING_CAPACITY = 1 << 21          # 2 MiB per direction per worker
SPIN_SECONDS = 50e-6             # spin before sleeping while a core is free (channel.pyx spins less when none is)


class WorkerProc:
    """The driver's view of one worker process."""

    def __init__(self, index, kind):
        self.index = index
        self.kind = kind                 # "task", "actor", or "host" (a process of guest actors: core.hosting)
        self.pid = None
        self.ready = False
        self.dead = False
        self.to_ring = None
        self.from_ring = None
        self.bell = None
        self.outbox = collections.deque()
        self.defined = set()
        self.task = None                 # running TaskSpec (task workers)
        self.pipelined = collections.deque()   # TaskSpecs sent behind ``task``, not known to have started
        self.blocked = 0                 # nested gets in progress
        self.pinned = False              # lent to a replay (a task reactor): no dynamic task goes here
        self.actor = None
        self.paths = ()
        self.host = None                 # a guest (co-location): the host process's WorkerProc it runs in
        self.guests = set()              # a host: its live guests
        self.killed = False              # a guest told to end by a kill: its end is no exit of its own
        self.stepping_bell = None        # a host: the doorbell its guests' replayed reactions are woken with


class Processes:
    """The zygote, every worker process started and the rings to them.

    ``rt`` is the runtime (core.runtime): spawning reads its session facts (``session``, ``shm_dir``,
    ``spill_dir``, ``store_limit``, ``namespace``, ``job_id``, ``node_id``, ``env``, ``log_to_driver``,
    ``bell``, ``lock``) and defining code on a worker reads its ``code`` table.
    """

    def __init__(self, rt, prefix):
        self._rt = rt
        self._prefix = prefix
        self._code = rt.code
        self.workers = {}                  # index -> WorkerProc
        self.pid_to_worker = {}
        self._next_worker_index = 0
        self.interrupting = {}             # worker index -> (is the cancelled call still running?, SIGINT count then)
        self.poller = channel.Poller(rt.bell)
        self.zygote_ring = channel.Ring(f"{prefix}-zygote", 1 << 16, True)
        self._rings = [self.zygote_ring]
        self._ring_owners = [None]         # who writes each polled ring: None for the zygote, else its worker
        self.poller.set_rings(self._rings)
        self._backlogged = set()           # workers whose outbox holds messages their full ring could not take
        self.zygote = None
        self.log_forwarder = None          # core.worker_logs: worker output to the driver's terminal

    # ================================================================== the zygote
    def start_zygote(self, session_lock):
        import pickle
        rt = self._rt
        cleanup = [f"{self._prefix}-*"]
        if rt.spill_dir:
            cleanup.append(os.path.join(rt.spill_dir, f"rr-{rt.session}-*"))
        config = {
            "sys_path": [p if p else os.getcwd() for p in sys.path],
            "cwd": os.getcwd(),
            "zygote_ring": self.zygote_ring.path,
            "driver_bell": rt.bell.path,
            "cleanup_globs": cleanup,
            "session_lock": leftovers.lock_path(rt.shm_dir, rt.session),
            "driver_pid": os.getpid(),
            "cleanup_dirs": [d for d in (rt.shm_dir, rt.spill_dir) if d],
            "preload": [m for m in ("torch", "gymnasium") if m in sys.modules],
        }
        env = dict(os.environ)
        # As Ray does: one BLAS/OpenMP thread per worker unless the user says otherwise, so actors doing matmuls
        # do not each start a thread per core.  Set before the zygote imports numpy (threads are sized at load).
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(rt.env)
        out = err = None                   # without forwarding, workers discard their output (core.worker)
        if rt.log_to_driver:
            if self.log_forwarder is None:  # one per session: a zygote started again writes to the same pipes
                self.log_forwarder = worker_logs.LogForwarder()
            out, err = self.log_forwarder.writers()
        self.zygote = subprocess.Popen(
            [sys.executable, "-m", "rayreact.core.zygote", pickle.dumps(config).hex()],
            stdin=subprocess.PIPE, stdout=out, stderr=err, env=env, close_fds=True, pass_fds=(session_lock,),
            start_new_session=True)     # a kill of the driver's process group leaves the zygote to clean up
        return self.zygote

    def command(self, cmd):
        """Send ``cmd`` to the zygote (spawn, kill, shutdown); a zygote already gone is ignored."""
        from .zygote import encode_command
        try:
            self.zygote.stdin.write(encode_command(cmd))
            self.zygote.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def stop_zygote(self):
        """Ask the zygote to end (it removes the session's files), killing it if it does not within 5 s.
        Called without the lock, once the service thread stopped."""
        self.command(("shutdown",))
        try:
            self.zygote.stdin.close()
        except OSError:
            pass
        try:
            self.zygote.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.zygote.kill()
            self.zygote.wait()
        if self.log_forwarder is not None:
            self.log_forwarder.close()     # drains the last lines, prints what deduplication held back

    # ================================================================== workers
    def spawn(self, kind, display_name="Worker", extra_env=None, host=None):
        """A new worker: its own process (forked by the zygote), or a guest of ``host``, a thread there
        with rings of its own (core.hosting)."""
        rt = self._rt
        index = self._next_worker_index
        self._next_worker_index += 1
        w = WorkerProc(index, kind)
        base = f"{self._prefix}-w{index}"
        try:
            w.to_ring = channel.Ring(f"{base}-in", RING_CAPACITY, True)
            w.from_ring = channel.Ring(f"{base}-out", RING_CAPACITY, True)
            w.bell = channel.Doorbell(f"{base}-bell", True)
        except OSError as exc:
            if exc.errno != errno.EMFILE:
                raise
            raise OSError(errno.EMFILE, f"Too many open files: rayreact could not start a worker process "
                                        f"({len(self.workers)} started so far; this process may open "
                                        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]} files). Raise the "
                                        "limit (ulimit -n) or close files this process holds.") from exc
        w.to_ring.reader_bell = w.bell
        w.from_ring.writer_bell = w.bell
        w.paths = (w.to_ring.path, w.from_ring.path, w.bell.path)
        if kind == "host":
            w.stepping_bell = channel.Doorbell(f"{base}-sbell", True)
            w.paths += (w.stepping_bell.path,)
        self.workers[index] = w
        self._rings.append(w.from_ring)
        self._ring_owners.append(w)
        self.poller.set_rings(self._rings)
        env = dict(rt.env)
        env.update(extra_env or {})
        spec = {
            "worker_index": index, "kind": kind, "session": rt.session, "shm_dir": rt.shm_dir,
            "to_worker": w.to_ring.path, "from_worker": w.from_ring.path, "worker_bell": w.bell.path,
            "driver_bell": rt.bell.path, "env": env, "log_to_driver": rt.log_to_driver,
            "spill_dir": rt.spill_dir, "store_limit": rt.store_limit,
            "namespace": rt.namespace, "job_id": rt.job_id, "node_id": rt.node_id,
            "display_name": display_name, "spin": SPIN_SECONDS,
        }
        if host is None:
            self.command(("spawn", spec))
        else:
            w.host = host
            host.guests.add(w)
            self.send(host, wire.Guest(spec))
        return w

    def end_worker(self, w):
        """Kill ``w``'s process: False.  A guest instead ends once its running call returns (its host lives
        on; the host stops a call that would not return, where it can: core.hosting): True, and the caller
        counts it dead now, as Ray's kill is immediate."""
        if w.host is not None:
            w.killed = True
            self.send(w, wire.Exit(False))
            self.send(w.host, wire.StopGuest(w.index))
            return True
        if w.pid:
            self.kill_pid(w.pid)
        return False

    def spawned(self, index, pid):
        """SPAWNED: worker ``index`` runs as ``pid``; one whose actor died before it started is killed."""
        w = self.workers.get(index)
        if w is not None:
            w.pid = pid
            self.pid_to_worker[pid] = w
            if w.actor is not None and w.actor.state == "DEAD" and w.actor.worker is w:
                self.end_worker(w)

    def died(self, pid):
        """DIED: the worker that ran as ``pid`` (or None); its unused pages go back now."""
        w = self.pid_to_worker.pop(pid, None)
        remove_slot_files(self._prefix, pid)
        return w

    def forget(self, w):
        """``w`` (marked dead) is read no more, and no longer counts as a process wanting a core."""
        if w.pid and (w.host is None or w.host.dead):
            w.bell.retire_waiter()               # it no longer wants a core
        bell = w.stepping_bell
        if w.pid and bell is not None and bell.waited_on():
            bell.retire_waiter()                 # (a host's stepping thread, counted on its own)
        if w.from_ring in self._rings:
            at = self._rings.index(w.from_ring)
            del self._rings[at]
            del self._ring_owners[at]
            self.poller.set_rings(self._rings)
        self._backlogged.discard(w)

    def remove_files(self, w):
        for p in w.paths:
            try:
                os.unlink(p)
            except OSError:
                pass

    def kill_pid(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.command(("kill", pid))

    # ================================================================== messaging
    def send(self, w, msg):
        if w.dead:
            return
        data = wire.encode(msg, w.to_ring.max_message, self._prefix)
        if w.outbox or not w.to_ring.try_write(data):
            if not w.outbox:
                w.to_ring.want_space(True)
                self._backlogged.add(w)
            w.outbox.append(data)

    def reply(self, w, req_id, payload):
        self.send(w, wire.Reply(req_id, payload))

    def flush_outboxes(self):
        if not self._backlogged:
            return
        for w in list(self._backlogged):
            if w.outbox and not w.dead:
                while w.outbox and w.to_ring.try_write(w.outbox[0]):
                    w.outbox.popleft()
                if not w.outbox:
                    w.to_ring.want_space(False)
            if not w.outbox or w.dead:
                self._backlogged.discard(w)

    def readable(self):
        """``(writer, ring)`` of every polled ring holding a frame now (writer None: the zygote's ring)."""
        owners, rings = self._ring_owners, self._rings
        return [(owners[i], rings[i]) for i in self.poller.readable()]

    def ensure_defined(self, w, code_id):
        if code_id not in w.defined:
            self.send(w, wire.Define(code_id, self._code[code_id]))
            w.defined.add(code_id)

    # ================================================================== interrupts
    def interrupt(self, w, still_running):
        """SIGINT to ``w``'s task code, now and again (~5/s) until it takes one or ``still_running()`` is False.

        A signal that lands just before a blocking call is seen only once the call returns: hence the repeats.
        Takes the lock."""
        with self._rt.lock:
            self.interrupting[w.index] = (still_running, w.bell.interrupts())
        _interrupt_main_thread(w.pid)

    def interrupt_again(self):
        """Re-send SIGINT to cancelled tasks whose worker has not taken one since (service thread)."""
        for index, (still_running, seen) in list(self.interrupting.items()):
            w = self.workers.get(index)
            if w is None or w.dead or not still_running() or w.bell.interrupts() != seen:
                del self.interrupting[index]
            else:
                _interrupt_main_thread(w.pid)


_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def _interrupt_main_thread(pid):
    """SIGINT to a worker's main thread (its tid is its pid).  Sent to the process, the signal may land on
    a helper thread, and Python then runs the handler only once the main thread's blocking call returns."""
    try:
        if _TGKILL is not None and libc().syscall(_TGKILL, pid, pid, signal.SIGINT) == 0:
            return
        os.kill(pid, signal.SIGINT)
    except (ProcessLookupError, TypeError, OSError):
        pass
