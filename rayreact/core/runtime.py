"""The driver runtime: scheduler and the only router of dynamic-mode calls (objects: core.objects).

::

    user thread ──.remote()──▶ Runtime.submit_*  ──▶ per-caller actor FIFOs / task queue
                                                        │ (when arguments are ready)
                                                        ▼
                                  ring D→W (or the outbox while the ring is full) ──▶ worker
    worker ──ring W→D──▶ pump() ──▶ DONE: objects (core.objects) ◀── get()/wait() of user threads
                              └──▶ REQUEST: nested submit/get/put/... from workers
                              └──▶ RELEASE: refs a worker dropped
    zygote ──ring Z→D──▶ pump() ──▶ SPAWNED / DIED (crash handling, restarts, retries)

Two threads pump, never at once (``_lock``): a user thread inside ``get``/
``wait`` pumps itself (no hand-off on the hot path; the doorbell wakes it
directly), and the service thread pumps when no user thread is waiting, so
nested submissions and dependency-driven dispatch progress while the script
computes.  The driver never blocks writing to a worker: a full ring spills
into that worker's outbox, flushed when the worker frees space.

A pool worker runs one task at a time, but a short task (its function's recent runs under 2 ms) may
be sent behind the one it runs (``w.pipelined``), so the worker starts it without waiting a round trip
through the driver; a worker blocking in ``get``/``wait`` gives such tasks back (DROP → DROPPED).

With replay on, the reactor (core.replay) stands in front of this runtime and holds it; this runtime
knows it only through ``attach_reactor`` (deaths, unknown ids) and never imports it.

``_lock`` is also the object table's lock (``ObjectTable.lock``): one lock for
both, so a call round trip takes no more acquisitions than before the table was
split out.  Other modules reach it as ``Runtime.lock``; ``Reactor.lock`` may be
held while taking it, never the reverse.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
import weakref

from .. import exceptions
from .refs import ObjectRef
from .runtime_api import DriverRuntimeBase
from . import channel, context, handles, ids, leftovers, protocol, refcount, serialization, session_dir, submission
from .serialization import INLINE, SEGMENT
from .handoff import remove_slot_files
from .libc import libc
from .spilling import spilling
from .objects import READY, ObjectTable

logger = logging.getLogger("rayreact")

RING_CAPACITY = 1 << 21          # 2 MiB per direction per worker
SPIN_SECONDS = 50e-6             # spin before sleeping while a core is free (channel.pyx spins less when none is)
class TaskSpec:
    __slots__ = ("task_id", "code_id", "code", "name", "args_desc", "direct", "return_ids", "num_returns",
                 "resources", "retries_left", "retry_exceptions", "caller", "actor_id", "method", "unresolved",
                 "worker", "env", "cancelled", "held", "is_create", "gpu_ids", "pg", "started")

    def __init__(self):
        self.unresolved = 0
        self.worker = None
        self.env = None
        self.cancelled = False
        self.held = ()
        self.is_create = False
        self.gpu_ids = ()
        self.pg = None
        self.started = None              # when it started on its worker (monotonic), for _note_task_time


class WorkerProc:
    """The driver's view of one worker process."""

    def __init__(self, index, kind):
        self.index = index
        self.kind = kind                 # "task" or "actor"
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


class ActorState:
    def __init__(self, actor_id, class_name, methods, code_id, code, options):
        self.actor_id = actor_id
        self.class_name = class_name
        self.methods = methods
        self.code_id = code_id
        self.code = code
        self.options = options
        self.worker = None
        self.state = "PENDING"           # PENDING -> ALIVE -> (RESTARTING ->) DEAD
        self.queues = collections.OrderedDict()   # caller -> deque of TaskSpec, per-caller FIFO
        self.in_flight = collections.OrderedDict()
        self.create_spec = None
        self.death_error = None
        self.restarts_left = options.get("max_restarts", 0) or 0
        self.max_task_retries = options.get("max_task_retries", 0) or 0
        self.max_concurrency = options.get("max_concurrency")
        self.name = options.get("name")
        self.namespace = None
        self.resources = {}
        self.gpu_ids = ()
        self.num_restarts = 0
        self.no_restart = False
        self.out_of_scope = False        # no handle to it exists any more (see core.handles)
        self.trace_key = options.get("_trace_key")


class Runtime(DriverRuntimeBase):
    """Everything ``init`` starts.  One per driver process."""

    is_driver = True
    local_mode = False
    is_actor = False

    def __init__(self, *, num_cpus=None, num_gpus=None, resources=None, object_store_memory=None,
                 namespace=None, runtime_env=None, log_to_driver=True):
        _raise_open_file_limit()
        self.namespace = namespace or f"anon-{os.urandom(4).hex()}"
        self.job_id = b"\x01\x00\x00\x00"
        self.node_id = os.urandom(28)
        self.log_to_driver = log_to_driver
        self.env = dict((runtime_env or {}).get("env_vars") or {})
        self.num_cpus = float(os.cpu_count() or 1) if num_cpus is None else float(num_cpus)
        self.num_gpus = float(_detect_gpus() if num_gpus is None else num_gpus)
        self.total = {"CPU": self.num_cpus, "memory": float(_total_memory() * 0.3),
                      "object_store_memory": float(object_store_memory or _default_store_memory())}
        if self.num_gpus:
            self.total["GPU"] = self.num_gpus
        self.total[f"node:127.0.0.1"] = 1.0
        self.total["node:__internal_head__"] = 1.0
        for k, v in (resources or {}).items():
            self.total[k] = float(v)
        self.available = dict(self.total)
        self.free_gpu_ids = list(range(int(self.num_gpus)))
        self._configure_store(object_store_memory)

        self._lock = threading.RLock()
        self.workers = {}                  # index -> WorkerProc
        self.pid_to_worker = {}
        self.idle_task_workers = collections.deque()
        self.task_queue = collections.deque()   # ready-to-run TaskSpecs waiting for resources/worker
        self.actors = {}
        self.named_actors = {}
        self.code = {}                     # code_id -> pickled code
        self.get_waiters = {}              # (worker, req_id) -> state
        self._next_worker_index = 0
        self._starting_task_workers = 0
        self._infeasible_warned = set()
        self.task_workers = []           # every pool worker started (dead ones too: few, and skipped)
        self._task_seconds = {}          # code id -> recent run time of its tasks (whether they may pipeline)
        self._shutting_down = False
        self._running = True
        self._placement = None
        self._lent_cpu = 0.0
        self._streams = {}     # stream id -> StreamState, for generator tasks still being consumed
        self._waiting_for_args = {}   # return id -> spec of a call waiting for its arguments
        self._interrupting = {}       # worker index -> (is the cancelled call still running?, SIGINT count then)
        self.tracing = bool(os.environ.get("RAYREACT_TRACE"))

        # Files of sessions whose processes were all killed at once go now; ours are covered by our lock
        # before the first of them exists (see core.leftovers).
        leftovers.sweep()
        self._session_lock = leftovers.hold_session_lock(self.shm_dir, self.session)
        self._spill_lock = leftovers.hold_session_lock(self.spill_dir, self.session) if self.spill_dir else None
        prefix = os.path.join(self.shm_dir, f"rr-{self.session}")
        self._prefix = prefix
        self.bell = channel.Doorbell(f"{prefix}-driver-bell", True)
        self._spin = SPIN_SECONDS
        channel.set_spin_seconds(SPIN_SECONDS)
        channel.count_awake_on(self.bell, True)
        self.object_table = ObjectTable(
            self._lock, session=self.session, bell=self.bell, store_limit=self.store_limit, spill_dir=self.spill_dir,
            on_handles_gone=self._handles_gone, ready_watch=self._streams, on_watched_ready=self._on_stream_done)
        self.objects = self.object_table.entries      # read here; entries change only through object_table
        spilling.configure(self.shm_dir, self.spill_dir, self.store_limit, self.object_table.shared_memory_used)
        serialization.segment_pool.spill_dir = self.spill_dir
        self.poller = channel.Poller(self.bell)
        self.zygote_ring = channel.Ring(f"{prefix}-zygote", 1 << 16, True)
        self._rings = [self.zygote_ring]
        self.poller.set_rings(self._rings)
        self._start_zygote()
        self._service = threading.Thread(target=self._service_loop, name="rayreact-service", daemon=True)
        self._service.start()
        self._pool_target = max(1, int(self.num_cpus))
        # Prestart the task pool (as Ray does): forks are cheap and the first task then finds a warm worker.
        with self._lock:
            for _ in range(min(self._pool_target, os.cpu_count() or 1)):
                self._starting_task_workers += 1
                self._spawn_worker("task")
        self._reactor = None           # the replay engine in front of this runtime, if any (attach_reactor)

    def _configure_store(self, object_store_memory):
        """Where objects live: the shared directory, the spill directory, the segment pool's sizes."""
        self.store_limit = int(object_store_memory or _default_store_memory())
        # Past the limit, values go to files in a private directory on disk (see core.spilling).
        dirs = session_dir.create(object_store_memory)
        self.session, self.shm_dir, self.spill_dir, shm_warning = dirs.session, dirs.shm, dirs.spill, dirs.warning
        # Freed segments are kept for reuse up to this many bytes (pages already allocated: writes are memcpy);
        # the driver keeps its mappings of files it wrote, and shares one file among identical large values.
        pool = serialization.segment_pool
        pool.limit = int(os.environ.get("RAYREACT_SEGMENT_POOL_BYTES", min(4 << 30, self.store_limit // 4)))
        pool.keep_limit = serialization.read_maps.limit = pool.limit
        serialization.snapshots.limit = pool.limit // 2
        if shm_warning:
            warnings.warn(shm_warning, stacklevel=4)     # (the user's init call)

    # ================================================================== for the reactor layer (core.replay)
    @property
    def lock(self):
        """The runtime's lock, also the object table's; ``Reactor.lock`` may be held while taking it."""
        return self._lock

    @property
    def session_prefix(self):
        """Path prefix of this session's shared-memory files (``<shm dir>/rr-<session>``)."""
        return self._prefix

    @property
    def pool_target(self):
        """How many task workers the pool keeps (at least one)."""
        return self._pool_target

    @property
    def store_used(self):
        """Bytes of objects held in shared memory now (the object table's count)."""
        return self.object_table.store_used

    @property
    def reactor(self):
        """The replay engine in front of this runtime (core.replay), or None."""
        return self._reactor

    def attach_reactor(self, reactor):
        """``reactor`` stands in front of this runtime (it holds it): it is told of every worker's death
        (``reactor.worker_died(w)``, under the lock) and asked whether an unknown object id is one of its
        refs (``reactor.knows(oid)``)."""
        self._reactor = reactor

    # ================================================================== processes
    def _start_zygote(self):
        import pickle
        cleanup = [f"{self._prefix}-*"]
        if self.spill_dir:
            cleanup.append(os.path.join(self.spill_dir, f"rr-{self.session}-*"))
        config = {
            "sys_path": [p if p else os.getcwd() for p in sys.path],
            "cwd": os.getcwd(),
            "zygote_ring": self.zygote_ring.path,
            "driver_bell": self.bell.path,
            "cleanup_globs": cleanup,
            "session_lock": leftovers.lock_path(self.shm_dir, self.session),
            "driver_pid": os.getpid(),
            "cleanup_dirs": [d for d in (self.shm_dir, self.spill_dir) if d],
            "preload": [m for m in ("torch", "gymnasium") if m in sys.modules],
        }
        env = dict(os.environ)
        # As Ray does: one BLAS/OpenMP thread per worker unless the user says otherwise, so actors doing matmuls
        # do not each start a thread per core.  Set before the zygote imports numpy (threads are sized at load).
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(self.env)
        self.zygote = subprocess.Popen(
            [sys.executable, "-m", "rayreact.core.zygote", pickle.dumps(config).hex()],
            stdin=subprocess.PIPE, env=env, close_fds=True, pass_fds=(self._session_lock,),
            start_new_session=True)     # a kill of the driver's process group leaves the zygote to clean up

    def _zygote_command(self, cmd):
        from .zygote import encode_command
        try:
            self.zygote.stdin.write(encode_command(cmd))
            self.zygote.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def _spawn_worker(self, kind, display_name="Worker", extra_env=None):
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
        self.workers[index] = w
        if kind == "task":
            self.task_workers.append(w)
        self._rings.append(w.from_ring)
        self.poller.set_rings(self._rings)
        env = dict(self.env)
        env.update(extra_env or {})
        spec = {
            "worker_index": index, "kind": kind, "session": self.session, "shm_dir": self.shm_dir,
            "to_worker": w.to_ring.path, "from_worker": w.from_ring.path, "worker_bell": w.bell.path,
            "driver_bell": self.bell.path, "env": env, "log_to_driver": self.log_to_driver,
            "spill_dir": self.spill_dir, "store_limit": self.store_limit,
            "namespace": self.namespace, "job_id": self.job_id, "node_id": self.node_id,
            "display_name": display_name, "spin": SPIN_SECONDS,
        }
        self._zygote_command(("spawn", spec))
        return w

    def _live_workers(self):
        return [w for w in self.workers.values() if not w.dead]

    # ================================================================== messaging
    def _send(self, w, msg):
        if w.dead:
            return
        data = protocol.dumps_fitting(msg, w.to_ring.max_message, self._prefix)
        if w.outbox or not w.to_ring.try_write(data):
            if not w.outbox:
                w.to_ring.want_space(True)
            w.outbox.append(data)

    def send_to_worker(self, w, msg):
        """Send ``msg`` to worker ``w`` (in order after every message the runtime sent it before)."""
        with self._lock:
            self._send(w, msg)

    def _flush_outboxes(self):
        for w in self.workers.values():
            if w.outbox and not w.dead:
                while w.outbox and w.to_ring.try_write(w.outbox[0]):
                    w.outbox.popleft()
                if not w.outbox:
                    w.to_ring.want_space(False)

    def _reactor_owns(self, oid):
        """Whether the replay engine in front (core.replay) handed out ``oid``."""
        return self._reactor is not None and self._reactor.knows(oid)

    def _ensure_defined(self, w, code_id):
        if code_id not in w.defined:
            self._send(w, (protocol.DEFINE, code_id, self.code[code_id]))
            w.defined.add(code_id)

    # ================================================================== pumping
    def _pump(self):
        """Handle every message waiting on any inbound ring.  Caller holds the lock."""
        progressed = False
        for msg in self.zygote_ring.read_all():
            self._on_zygote(protocol.loads(msg))
            progressed = True
        for w in list(self.workers.values()):
            if w.dead or not w.from_ring.readable():
                continue
            ring = w.from_ring
            while True:
                raw = ring.read()
                if raw is None:
                    break
                progressed = True
                self._on_worker_message(w, protocol.loads(raw))
        if refcount.released:
            self.object_table.release_dropped()
        self._flush_outboxes()
        return progressed

    def _service_loop(self):
        while self._running:
            try:
                self.poller.wait(0.2, True)
                if not self._running:
                    return
                with self._lock:
                    if self._running:
                        if self._pump():
                            self.bell.ring()     # a waiter may have looked just before we took its message
                        self._check_dead_workers()
                        if self._interrupting:
                            self._interrupt_again()
            except Exception:  # never let the service thread die silently
                if self._running:
                    logger.exception("rayreact service loop error")

    def wait_until(self, predicate, timeout):
        """Pump until ``predicate()`` holds (checked under the lock) or ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.bell.enter_active()
        try:
            while True:
                with self._lock:
                    # Read before pumping: a message another thread pumps after this rings the bell again.
                    since = self.bell.sequence()
                    if self._pump() and self.bell.others_active():
                        self.bell.ring()         # another thread's wait may be for what this pump handled
                    if predicate():
                        return True
                    if self._shutting_down:
                        raise exceptions.RaySystemError("rayreact was shut down while waiting")
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self.poller.wait(min(remaining, 0.5), False, since)
                else:
                    self.poller.wait(0.5, False, since)
        finally:
            self.bell.leave_active()
            # Messages that arrived while we were the active waiter but after our last pump.
            if self._lock.acquire(blocking=False):
                try:
                    self._pump()
                finally:
                    self._lock.release()
            else:
                self.bell.ring()

    def _check_dead_workers(self):
        # The zygote reports deaths; this only catches a zygote that itself died.
        if self.zygote.poll() is not None and not self._shutting_down:
            # Its workers die with it (their parent-death signal).  A new zygote first: retried tasks, restarted
            # actors and the task pool then fork from it, so the session goes on as after any worker's death.
            orphans = [w for w in self.workers.values() if not w.dead]
            self.zygote.stdin.close()
            self._start_zygote()
            for w in orphans:
                if w.pid:
                    self._kill_pid(w.pid)
                self.on_worker_died(w, "The worker's parent, the rayreact zygote process, died.")

    # ================================================================== zygote / worker messages
    def _on_zygote(self, msg):
        kind = msg[0]
        if kind == protocol.SPAWNED:
            w = self.workers.get(msg[1])
            if w is not None:
                w.pid = msg[2]
                self.pid_to_worker[msg[2]] = w
                if w.actor is not None and w.actor.state == "DEAD" and w.actor.worker is w:
                    self._kill_pid(w.pid)
        elif kind == protocol.DIED:
            w = self.pid_to_worker.pop(msg[1], None)
            remove_slot_files(self._prefix, msg[1])    # a dead worker's unused pages go back now
            if w is not None and not w.dead:
                # Drain what it managed to send before dying.
                for raw in w.from_ring.read_all():
                    self._on_worker_message(w, protocol.loads(raw))
                status = msg[2]
                how = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else \
                    f"exited with code {os.WEXITSTATUS(status)}"
                self.on_worker_died(w, f"The worker process (pid={w.pid}) {how}.")

    def _on_worker_message(self, w, msg):
        kind = msg[0]
        if kind == protocol.DONE:
            self._on_done(w, msg[1], msg[2], msg[3])
        elif kind == protocol.REQUEST:
            self._on_request(w, msg[1], msg[2], msg[3])
        elif kind == protocol.RELEASE:
            self.object_table.worker_released(w.index, msg[1])
        elif kind == protocol.STREAM_ITEM:
            self._on_stream_item(w, msg[1], msg[2], msg[3])
        elif kind == protocol.READY:
            w.ready = True
            if w.kind == "task" and w.task is None:
                self._starting_task_workers -= 1
                self.idle_task_workers.append(w)
                self._schedule()
        elif kind == protocol.EXITING:
            w.exiting = True
        elif kind == protocol.DROPPED:
            self._on_given_back(w, msg[1])

    # ================================================================== objects (core.objects)
    def _ship_args(self, w, spec):
        """Direct arguments' descriptors; refs nested in any argument become borrowed by ``w``."""
        table = self.object_table
        if spec.args_desc[2]:
            table.lend(w.index, spec.args_desc[2])
        return [table.ship(w.index, self.objects[oid]) for oid in spec.direct]

    # ================================================================== public API: objects
    def put(self, value):
        if refcount.released:
            # Free what the script dropped first: its segments can then be reused for this value.
            with self._lock:
                self.object_table.release_dropped()
        if isinstance(value, ObjectRef):
            raise TypeError("Calling 'put' on an ray.ObjectRef is not allowed. If you really want to do this, "
                            "you can wrap the ray.ObjectRef in a list and call 'put' on it.")
        try:
            desc = self.object_table.place(value)
        except serialization.SerializationError as exc:
            raise TypeError(str(exc)) from exc.__cause__
        oid = ids.new_id()
        ref = ObjectRef(oid)
        with self._lock:
            self.object_table.reserve(oid)
            self.object_table.fill(oid, desc)
        return ref

    def get_values(self, object_ids, timeout):
        objects = self.objects
        first_unready = [0]      # entries a get holds refs to stay ready: each check resumes where one failed

        def all_ready():
            i, n = first_unready[0], len(object_ids)
            while i < n:
                e = objects.get(object_ids[i])
                if e is None or e.state != READY:
                    first_unready[0] = i
                    return False
                i += 1
            first_unready[0] = n
            return True

        with self._lock:
            ready = all_ready()
            if not ready:
                for oid in object_ids:
                    if oid not in objects and not self._reactor_owns(oid):
                        # Live refs keep their entries, so an unknown id is not from this session.
                        raise ValueError(f"ObjectRef {oid.hex()} does not belong to this session (was it created "
                                         "before the last shutdown()?).")
        if not ready:
            if not self.wait_until(all_ready, timeout):
                raise exceptions.GetTimeoutError(
                    f"Get timed out: some object(s) not ready after {timeout} s.")
        out = []
        with self._lock:
            entries = [objects[oid] for oid in object_ids]
        load = self.object_table.load
        for e in entries:
            value = load(e.desc)
            if e.is_error:
                raise submission.raisable(value)
            out.append(value)
        return out

    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        objects = self.objects

        def count_ready():
            return sum(1 for oid in object_ids if (e := objects.get(oid)) is not None and e.state == READY)

        self.wait_until(lambda: count_ready() >= num_returns, timeout)
        with self._lock:
            ready_flags = [(e := objects.get(oid)) is not None and e.state == READY for oid in object_ids]
        return ready_flags

    # ================================================================== generator tasks
    def _stream(self, stream_id):
        st = self._streams.get(stream_id)
        if st is None:
            st = self._streams[stream_id] = _StreamState()
        return st

    def _on_stream_item(self, w, oid, desc, keep):
        stream_id = oid[:24] + b"\0\0\0\0"
        table = self.object_table
        table.reserve(oid)
        st = self._stream(stream_id)
        st.dynamic = not keep
        if not st.dropped:
            table.hold((oid,))      # the generator owns the value until it hands the ref out
            st.held.add(oid)
        self.object_table.fill(oid, desc)
        self._answer_stream_waiters(stream_id, st)

    def _on_stream_done(self, oid):
        st = self._streams.get(oid)
        if st is None:
            return
        st.done = True
        if st.dynamic:
            # The DynamicObjectRefGenerator value now holds its items.
            held, st.held = st.held, set()
            self.object_table.unhold(held)
        self._answer_stream_waiters(oid, st)
        if st.dropped or st.dynamic:
            del self._streams[oid]

    def _stream_poll(self, stream_id, index, take, w=None):
        """("item", id) | ("error", None) | ("end", None) | ("pending", None)."""
        item = submission.item_id(stream_id, index)
        e = self.objects.get(item)
        st = self._streams.get(stream_id)
        if e is not None and e.state == READY and st is not None and item in st.held:
            if take:
                if w is not None:
                    self.object_table.worker_holds(w.index, [item])
                    st.held.discard(item)
                    self.object_table.unhold((item,))    # (the worker's borrow keeps it now)
                else:
                    st.held.discard(item)
                    st.pending_handoff.append(item)
            return ("item", item)
        s = self.objects.get(stream_id)
        if s is not None and s.state == READY:
            return ("error", None) if s.is_error else ("end", None)
        if s is None and st is None:
            return ("end", None)
        return ("pending", None)

    def stream_next(self, stream_id, index, timeout, peek=False):
        with self._lock:
            result = self._stream_poll(stream_id, index, take=False)
        if result[0] == "pending" and not peek:
            ok = self.wait_until(lambda: self._stream_poll(stream_id, index, False)[0] != "pending", timeout)
            if not ok:
                raise exceptions.GetTimeoutError(f"No item of the generator was ready within {timeout} s.")
        if peek:
            return result
        with self._lock:
            result = self._stream_poll(stream_id, index, take=True)
            if result[0] == "item":
                ref = ObjectRef(result[1])
                st = self._streams[stream_id]
                st.pending_handoff.remove(result[1])
                self.object_table.unhold((result[1],))    # (the ref keeps it now)
                return ("item", ref)
        return result

    def stream_drop(self, stream_id, index):
        with self._lock:
            self._drop_stream(stream_id)

    def _drop_stream(self, stream_id):
        st = self._streams.get(stream_id)
        if st is None:
            return
        st.dropped = True
        held, st.held = st.held, set()
        self.object_table.unhold(held)
        if st.done:
            del self._streams[stream_id]

    def _answer_stream_waiters(self, stream_id, st):
        if not st.waiters:
            return
        still = []
        for w, req_id, index in st.waiters:
            result = self._stream_poll(stream_id, index, take=True, w=w)
            if result[0] == "pending":
                still.append((w, req_id, index))
            else:
                self._reply(w, req_id, result)
        st.waiters = still

    # ================================================================== public API: tasks
    def submit_task(self, remote_function, args, kwargs, options, return_ids=None):
        """``return_ids``: ids the caller already handed out for this call's returns (a replayed task
        whose worker died runs again under the refs the script holds)."""
        num_returns = submission._num_returns(options, remote_function._default_num_returns)
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        code_id = submission.code_id_of(remote_function)
        pg = self._pg_of(options)
        if pg is not None:
            with self._lock:
                self._check_pg_request(pg, submission.task_resources(options, 1),
                                       remote_function._function.__qualname__)
        if return_ids is None:
            return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        with self._lock:
            if code_id not in self.code:
                self.code[code_id] = serialization.dumps_code(remote_function._function)
            self._submit_task_locked(None, code_id, remote_function._function_name, args_desc, direct,
                                     return_ids, num_returns, options, pg)
        return submission._returns(refs, num_returns)

    def _submit_task_locked(self, caller, code_id, name, args_desc, direct, return_ids, num_returns, options,
                            pg=None):
        if refcount.released:
            self.object_table.release_dropped()
        spec = TaskSpec()
        spec.task_id = ids.task_id()
        spec.code_id = code_id
        spec.name = name
        spec.args_desc = args_desc
        spec.direct = direct
        spec.return_ids = return_ids
        spec.num_returns = num_returns
        spec.resources = submission.task_resources(options, 1)
        max_retries = options.get("max_retries")
        spec.retries_left = 3 if max_retries is None else (10 ** 9 if max_retries == -1 else max_retries)
        spec.retry_exceptions = options.get("retry_exceptions", False)
        spec.caller = caller
        spec.actor_id = None
        spec.method = None
        spec.pg = pg if pg is not None or caller is None else self._pg_of(options)
        env = (options.get("runtime_env") or {}).get("env_vars")
        spec.env = dict(env) if env else None
        owner = caller.index if caller is not None else None
        for oid in return_ids:
            self.object_table.reserve(oid, owner)
        self._hold_args(spec)
        self._when_args_ready(spec, self._enqueue_task)

    def _hold_args(self, spec):
        held = list(spec.direct) + list(spec.args_desc[2])
        self.object_table.hold(held)
        spec.held = held

    def _when_args_ready(self, spec, then):
        missing = [oid for oid in spec.direct if self.objects[oid].state != READY]
        if not missing:
            then(spec)
            return
        spec.unresolved = len(set(missing))
        for oid in spec.return_ids:
            self._waiting_for_args[oid] = spec   # so cancel() finds it without a scan

        def on_ready(oid, e, spec=spec):
            spec.unresolved -= 1
            if spec.unresolved == 0:
                for rid in spec.return_ids:
                    self._waiting_for_args.pop(rid, None)
                then(spec)

        when_ready = self.object_table.when_ready
        for oid in set(missing):
            when_ready(oid, on_ready)

    def _failed_dependency(self, spec):
        for oid in spec.direct:
            e = self.objects[oid]
            if e.is_error:
                return e
        return None

    def _enqueue_task(self, spec):
        if spec.cancelled:
            return
        failed = self._failed_dependency(spec)
        if failed is not None:
            self._complete_with_desc(spec, failed.desc)
            return
        self.task_queue.append(spec)
        self._schedule()

    def _fits(self, res):
        avail = self.available
        for k, v in res.items():
            if avail.get(k, 0.0) + 1e-9 < v:
                return False
        return True

    def _feasible(self, res):
        for k, v in res.items():
            if self.total.get(k, 0.0) + 1e-9 < v:
                return False
        return True

    def _acquire(self, res):
        for k, v in res.items():
            self.available[k] = self.available.get(k, 0.0) - v

    def _release(self, res):
        for k, v in res.items():
            self.available[k] = self.available.get(k, 0.0) + v
        if self._placement is not None and self._placement.place_pending():
            self._retry_pending_actor_starts()

    def _take_gpus(self, n):
        if not n:
            return ()
        count = max(1, int(n)) if n >= 1 else 1
        if n < 1:
            return tuple(self.free_gpu_ids[:1]) or (0,)
        taken = self.free_gpu_ids[:count]
        del self.free_gpu_ids[:count]
        return tuple(taken)

    def _give_gpus(self, gpu_ids, n):
        if n and n >= 1:
            self.free_gpu_ids.extend(gpu_ids)
            self.free_gpu_ids.sort()

    def _schedule(self):
        """Start queued tasks in order while a task worker is idle; keep the pool big enough for what waits.

        The scan stops at the first task that finds no idle worker: every task needs one, so what follows
        could not start either (scanning on would make a fan-out quadratic: each submission and each
        finished task rescanned the whole queue).  Tasks passed over for lack of resources keep their place.
        """
        queue = self.task_queue
        if not queue:
            return
        passed_over = []
        while queue:
            w = self._idle_task_worker()
            if w is None:
                if queue[0].cancelled:
                    queue.popleft()
                    continue
                if self._pipeline(queue[0]):
                    queue.popleft()
                    continue
                waiting = len(passed_over) + len(queue)
                while self._grow_pool(waiting):
                    pass
                break
            spec = queue.popleft()
            if spec.cancelled:
                self.idle_task_workers.append(w)
                continue
            res = spec.resources
            if not (self._pg_fits(spec) if spec.pg else self._fits(res)):
                self.idle_task_workers.append(w)
                if not spec.pg and not self._feasible(res):
                    self._warn_infeasible(res)
                passed_over.append(spec)
                continue
            if spec.pg:
                self._pg_acquire(spec)
            else:
                self._acquire(res)
            spec.gpu_ids = self._take_gpus(res.get("GPU", 0))
            self._dispatch_task(w, spec)
        queue.extendleft(reversed(passed_over))

    def _warn_infeasible(self, res):
        key = tuple(sorted(res.items()))
        if key not in self._infeasible_warned:
            self._infeasible_warned.add(key)
            warnings.warn(f"The following resource request cannot be scheduled right now: {dict(res)}. "
                          f"This node has {self.total}; the task will wait until resources are added.",
                          stacklevel=3)

    def _idle_task_worker(self):
        while self.idle_task_workers:
            w = self.idle_task_workers.pop()   # LIFO: the worker that just finished is still warm (spinning)
            if not w.dead and w.task is None and not w.pinned:
                return w
        return None

    def _grow_pool(self, waiting):
        """Start one more task worker if tasks wait and the pool is below its target: True if it did."""
        live = sum(1 for w in self.workers.values() if w.kind == "task" and not w.dead and not w.pinned)
        blocked = sum(1 for w in self.workers.values() if w.kind == "task" and not w.dead and w.blocked)
        target = self._pool_target + blocked
        if waiting and live < target and self._starting_task_workers < waiting:
            self._starting_task_workers += 1
            self._spawn_worker("task")
            return True
        return False

    # A fan-out of short tasks would idle every worker for most of each task, waiting a round trip through
    # the driver for its next one.  So a task may be sent behind the one a busy pool worker runs; the worker
    # starts it the moment the first ends.  Only tasks known to be short (a long one would hold up what waits
    # behind it while another worker idles), of the running task's resource shape (the next takes over its
    # share when it starts: accounting stays per running task), and never behind a task blocked in get.
    PIPELINE_DEPTH = 1
    PIPELINE_BELOW_SECONDS = 0.002

    def _pipeline(self, spec):
        """Send ``spec`` behind a busy pool worker's task if that may pay: True if it was sent."""
        if spec.cancelled or not self._may_pipeline(spec):
            return False
        for w in self.task_workers:
            running = w.task
            if (running is not None and not w.dead and not w.pinned and not w.blocked
                    and not running.cancelled
                    and len(w.pipelined) < self.PIPELINE_DEPTH and running.resources == spec.resources
                    and self._may_pipeline(running)):
                spec.worker = w
                w.pipelined.append(spec)
                self._send_task(w, spec)
                return True
        return False

    def _may_pipeline(self, spec):
        if spec.pg or spec.env or spec.num_returns < 0 or "GPU" in spec.resources:
            return False
        seconds = self._task_seconds.get(spec.code_id)
        return seconds is not None and seconds < self.PIPELINE_BELOW_SECONDS

    def _note_task_time(self, spec):
        if spec.started is not None:
            took = time.monotonic() - spec.started
            before = self._task_seconds.get(spec.code_id)
            self._task_seconds[spec.code_id] = took if before is None else 0.75 * before + 0.25 * took

    def _start_pipelined(self, w, finished):
        """``finished`` ended on ``w``; the task sent behind it starts now, with the share it held."""
        spec = w.pipelined.popleft()
        spec.gpu_ids = ()
        spec.started = time.monotonic()
        w.task = spec

    def _recall_pipelined(self, w):
        """``w``'s task blocked: ask for the tasks sent behind it back (DROPPED, or their DONE if started)."""
        for spec in w.pipelined:
            self._send(w, (protocol.DROP, spec.task_id))

    def _on_given_back(self, w, task_id):
        """DROPPED: ``w`` gave back a task sent behind another before starting it; it queues again first."""
        if w.task is not None and w.task.task_id == task_id:
            spec = w.task                  # it had taken over the task before it
            w.task = None
            if w.pipelined and not w.dead:
                self._start_pipelined(w, spec)
            else:
                self._release_task_resources(spec)
                if not w.dead:
                    self.idle_task_workers.append(w)
        else:
            spec = next((s for s in w.pipelined if s.task_id == task_id), None)
            if spec is None:
                return
            w.pipelined.remove(spec)
        spec.worker = None
        if spec.cancelled:
            self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
        else:
            self.task_queue.appendleft(spec)
        self._schedule()

    def lendable_task_workers(self):
        """Started pool workers that run nothing and are lent to no replay, least recently used first."""
        return list(dict.fromkeys(w for w in self.idle_task_workers
                                  if w.ready and not w.dead and w.task is None and not w.pinned))

    def pin_task_workers(self, count, code_ids):
        """Lend ``count`` idle, started task workers to a replay (with ``code_ids`` defined on each), or
        None if that many are not idle now.  Caller holds the lock."""
        idle = self.lendable_task_workers()
        if len(idle) < count:
            return None
        lent = idle[-count:]                  # the most recently used: still warm
        for w in lent:
            w.pinned = True
            for code_id in code_ids:
                self._ensure_defined(w, code_id)
        self.idle_task_workers = collections.deque(w for w in self.idle_task_workers if not w.pinned)
        return lent

    def unpin_task_worker(self, w):
        """A replay gives a task worker back to the pool.  Caller holds the lock."""
        if not w.pinned:
            return
        w.pinned = False
        if not w.dead and w.task is None:
            self.idle_task_workers.append(w)
            self._schedule()

    def _dispatch_task(self, w, spec):
        spec.worker = w
        w.task = spec
        spec.started = time.monotonic()
        self._send_task(w, spec)

    def _send_task(self, w, spec):
        self._ensure_defined(w, spec.code_id)
        arg_descs = self._ship_args(w, spec)
        env = spec.env
        if spec.gpu_ids or "GPU" in spec.resources:
            env = dict(env or {})
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpu_ids)
        elif self.num_gpus:
            env = dict(env or {})
            env["CUDA_VISIBLE_DEVICES"] = ""
        self._send(w, (protocol.RUN_TASK, spec.task_id, spec.code_id, spec.name, spec.args_desc, arg_descs,
                       spec.return_ids, spec.num_returns, env, {k: v for k, v in spec.resources.items()},
                       self._pg_info(spec)))

    def _on_done(self, w, task_id, results, ok):
        if task_id.startswith(b"create:"):
            self._on_actor_created(w, results, ok)
            return
        if w.kind == "actor":
            actor = w.actor
            spec = actor.in_flight.pop(task_id, None) if actor is not None else None
            if spec is not None and spec.cancelled:
                for _, desc in results:
                    self.object_table.discard(desc)
                self._complete_with_error(spec, self._cancelled_call_error(actor, spec))
                if actor.out_of_scope:
                    self._maybe_retire(actor)
                return

        else:
            spec = w.task
            w.task = None
            if spec is not None:
                self._note_task_time(spec)
                if w.pipelined and not w.dead:
                    self._start_pipelined(w, spec)
                else:
                    self._release_task_resources(spec)
            if not w.dead and w.task is None:
                self.idle_task_workers.append(w)
        if spec is None:
            for _, desc in results:
                self.object_table.discard(desc)
            return
        if not ok and spec.retry_exceptions and spec.retries_left > 0 and w.kind == "task":
            if self._should_retry_exception(spec, results):
                spec.retries_left -= 1
                for _, desc in results:
                    self.object_table.discard(desc)
                spec.worker = None
                self.task_queue.append(spec)
                self._schedule()
                return
        if not ok and spec.num_returns == submission.DYNAMIC and results and results[0][1][3]:
            results = self._dynamic_error_as_item(w, results[0][0], results[0][1])
        for oid, desc in results:
            self.object_table.fill(oid, desc)
        self._task_finished(spec)
        if w.kind == "actor":
            if w.actor is not None and w.actor.out_of_scope:
                self._maybe_retire(w.actor)
            return
        self._schedule()

    def _dynamic_error_as_item(self, w, stream_id, error_desc):
        """A dynamic generator that raised: its items stay, and the error becomes one more item (as in Ray)."""
        if self.objects.get(stream_id) is None:
            return [(stream_id, error_desc)]      # nobody holds the generator's ref
        from .refs import DynamicObjectRefGenerator
        st = self._streams.get(stream_id)
        count = len(st.held) if st is not None else 0
        self._on_stream_item(w, submission.item_id(stream_id, count), error_desc, False)
        items = [ObjectRef(submission.item_id(stream_id, i)) for i in range(count + 1)]
        return [(stream_id, self.object_table.place(DynamicObjectRefGenerator(items)))]

    def _release_task_resources(self, spec):
        """A task left its worker (done, crashed or cancelled): give back its CPU/GPU/custom share."""
        if spec.pg:
            self._pg_release(spec)
        else:
            self._release(spec.resources)
        self._give_gpus(spec.gpu_ids, spec.resources.get("GPU", 0))

    def _should_retry_exception(self, spec, results):
        if spec.retry_exceptions is True:
            return True
        if isinstance(spec.retry_exceptions, (list, tuple)) and results:
            err = serialization.loads_pack(results[0][1][1]) if results[0][1][0] == INLINE else None
            cause = getattr(err, "cause", None)
            return isinstance(cause, tuple(spec.retry_exceptions))
        return False

    def _task_finished(self, spec):
        self.object_table.unhold(spec.held)
        spec.held = ()
        if spec.args_desc[0] == SEGMENT:
            self.object_table.discard(spec.args_desc)

    def _complete_with_desc(self, spec, desc):
        for oid in spec.return_ids:
            if desc[0] == SEGMENT:
                # Errors are inline; a segment here would be shared, so copy the error inline.
                value = self.object_table.load(desc)
                self.object_table.fill_error(oid, value)
            else:
                self.object_table.fill(oid, desc)
        self._task_finished(spec)

    @staticmethod
    def _cancelled_call_error(actor, spec):
        """What Ray 2.60 gives for a cancelled actor call: its coroutine's cancellation, for an async actor."""
        err = exceptions.TaskCancelledError(spec.task_id.hex())
        if not actor.is_async:
            return err
        return exceptions.RayTaskError(spec.name, f"{type(err).__name__}: {err}", err).as_instanceof_cause()

    def _complete_with_error(self, spec, err):
        ser = serialization.serialize(err, is_error=True)
        desc = (INLINE, ser.pack(), [], True)
        for oid in spec.return_ids:
            self.object_table.fill(oid, desc)
        self._task_finished(spec)

    # ================================================================== public API: actors
    def create_actor(self, actor_class, args, kwargs, options):
        name = options.get("name")
        namespace = options.get("namespace") or self.namespace
        if self.tracing:
            # One key per .remote() on an actor class, get_if_exists hits included (as the Ray-side tracer does).
            from .tracing import creating_actor_key
            options = {**options, "_trace_key": creating_actor_key(actor_class._cls.__name__)}
        with self._lock:
            if name:
                existing = self.named_actors.get((namespace, name))
                if existing is not None and self.actors[existing].state != "DEAD":
                    if options.get("get_if_exists"):
                        a = self.actors[existing]
                        return handles.new_handle(a.actor_id, a.class_name, a.methods, weak=True)
                    raise ValueError(f"The name {name} (namespace={namespace}) is already taken. Please use a "
                                     "different name or get the existing actor using "
                                     f"ray.get_actor('{name}', namespace='{namespace}')")
        pg = self._pg_of(options)
        if pg is not None:
            res = submission.task_resources(options, 0)
            with self._lock:
                self._check_pg_request(pg, res or {"CPU": 1.0}, actor_class._cls.__qualname__)
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        code_id = submission.code_id_of(actor_class)
        actor_id = ids.actor_id()
        with self._lock:
            if code_id not in self.code:
                self.code[code_id] = serialization.dumps_code(actor_class._cls)
            err = self._create_actor_locked(actor_id, code_id, actor_class._cls.__name__, actor_class._methods,
                                            actor_class._is_async, args_desc, direct, options, namespace)
            if err is not None:
                found = self._named_if_get_if_exists(options, namespace)
                if found is not None:
                    return handles.new_handle(*found, weak=True)
                raise err
            handle = handles.new_handle(actor_id, actor_class._cls.__name__, actor_class._methods, original=True)
        return handle

    def _named_if_get_if_exists(self, options, namespace):
        """get_if_exists, and another caller took the name since we looked: (id, class, methods) of its actor."""
        actor_id = self.named_actors.get((namespace, options.get("name")))
        if not options.get("get_if_exists") or actor_id is None or self.actors[actor_id].state == "DEAD":
            return None
        a = self.actors[actor_id]
        return (a.actor_id, a.class_name, a.methods)

    def _create_actor_locked(self, actor_id, code_id, class_name, methods, is_async, args_desc, direct, options,
                             namespace):
        name = options.get("name")
        if name:
            existing = self.named_actors.get((namespace, name))
            if existing is not None and self.actors[existing].state != "DEAD":
                return ValueError(f"The name {name} (namespace={namespace}) is already taken.")
        actor = ActorState(actor_id, class_name, methods, code_id, self.code[code_id], options)
        self._track_handles(actor_id)
        actor.namespace = namespace
        actor.is_async = is_async
        if actor.max_concurrency is None:
            actor.max_concurrency = 1000 if is_async else 1
        actor.resources = submission.task_resources(options, 0)
        self.actors[actor_id] = actor
        if name:
            self.named_actors[(namespace, name)] = actor_id
        spec = TaskSpec()
        spec.task_id = b"create:" + actor_id
        spec.is_create = True
        spec.args_desc = args_desc
        spec.direct = direct
        spec.return_ids = []
        spec.actor_id = actor_id
        spec.caller = None
        spec.pg = self._pg_of(options)
        env = (options.get("runtime_env") or {}).get("env_vars")
        spec.env = dict(env) if env else None
        self._hold_args(spec)
        actor.create_spec = spec
        self._when_args_ready(spec, self._start_actor)
        return None

    def _start_actor(self, spec):
        actor = self.actors[spec.actor_id]
        if actor.state == "DEAD":
            return
        failed = self._failed_dependency(spec)
        if failed is not None:
            err = self.object_table.load(failed.desc)
            self._actor_died(actor, exceptions.ActorDiedError(
                error_msg=f"The actor died because of an error raised in its creation task: {err}"))
            return
        res = actor.resources
        if spec.pg:
            if not self._pg_fits(spec):
                self._pending_actor_starts.append(spec)
                return
            self._pg_acquire(spec)
        elif not self._fits(res):
            if not self._feasible(res):
                warnings.warn(f"The actor {actor.class_name} requires {res}, which this node ({self.total}) "
                              "cannot satisfy; it will wait until resources are added.", stacklevel=2)
            self._pending_actor_starts.append(spec)
            return
        else:
            self._acquire(res)
        actor.gpu_ids = self._take_gpus(res.get("GPU", 0))
        extra_env = {}
        if self.num_gpus:
            extra_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in actor.gpu_ids)
        if spec.env:
            extra_env.update(spec.env)
        w = self._spawn_worker("actor", actor.class_name, extra_env)
        w.actor = actor
        actor.worker = w
        self._ensure_defined(w, actor.code_id)
        arg_descs = self._ship_args(w, spec)
        self._send(w, (protocol.CREATE, actor.actor_id, actor.code_id, actor.class_name, spec.args_desc, arg_descs,
                       actor.max_concurrency, actor.is_async, dict(res), (actor.class_name, actor.methods, actor.name),
                       actor.trace_key, self._pg_info(spec)))

    @property
    def _pending_actor_starts(self):
        if not hasattr(self, "_pending_actor_starts_list"):
            self._pending_actor_starts_list = collections.deque()
        return self._pending_actor_starts_list

    def _retry_pending_actor_starts(self):
        pending = self._pending_actor_starts
        n = len(pending)
        for _ in range(n):
            self._start_actor(pending.popleft())

    def _on_actor_created(self, w, results, ok):
        actor = w.actor
        if actor is None:
            return
        if ok:
            if actor.state != "DEAD":
                actor.state = "ALIVE"
                self._pump_actor(actor)
                self._maybe_retire(actor)
            return
        err = serialization.loads_pack(results[0][1][1])
        self._actor_died(actor, exceptions.ActorDiedError(
            error_msg="The actor died because of an error raised in its creation task, "
                      f"{err}"), kill=True)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        num_returns = submission.normalize_num_returns(num_returns)
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        with self._lock:
            self._submit_call_locked(None, handle._actor_id, info.name, args_desc, direct, return_ids, num_returns,
                                     info.task_name)
        return submission._returns(refs, num_returns)

    def _submit_call_locked(self, caller, actor_id, method, args_desc, direct, return_ids, num_returns,
                            task_name=None):
        table = self.object_table
        if refcount.released:
            table.release_dropped()
        owner = caller.index if caller is not None else None
        for oid in return_ids:
            table.reserve(oid, owner)
        actor = self.actors.get(actor_id)
        spec = TaskSpec()
        spec.task_id = ids.task_id()
        spec.args_desc = args_desc
        spec.direct = direct
        spec.return_ids = return_ids
        spec.num_returns = num_returns
        spec.actor_id = actor_id
        spec.method = method
        spec.name = task_name
        spec.caller = caller
        spec.retries_left = actor.max_task_retries if actor is not None else 0
        spec.retry_exceptions = False
        self._hold_args(spec)
        if actor is None:
            self._complete_with_error(spec, exceptions.ActorDiedError(
                error_msg="The actor is unknown to this session (was it created by another driver?)."))
            return
        if actor.state == "DEAD":
            self._complete_with_error(spec, actor.death_error)
            return
        key = caller.index if caller is not None else -1
        q = actor.queues.get(key)
        if q is None:
            q = actor.queues[key] = collections.deque()
        q.append(spec)
        if len(q) == 1:
            self._when_args_ready(spec, lambda s, actor=actor: self._pump_actor(actor))

    def _pump_actor(self, actor):
        """Send every call whose turn has come: the head of each caller's FIFO, once its args are ready."""
        if actor.state != "ALIVE":
            return
        w = actor.worker
        for key, q in list(actor.queues.items()):
            while q:
                spec = q[0]
                if spec.unresolved:
                    break
                if any(self.objects[oid].state != READY for oid in spec.direct):
                    spec.unresolved = 0
                    self._when_args_ready(spec, lambda s, actor=actor: self._pump_actor(actor))
                    break
                q.popleft()
                failed = self._failed_dependency(spec)
                if failed is not None:
                    self._complete_with_desc(spec, failed.desc)
                    continue
                actor.in_flight[spec.task_id] = spec
                spec.worker = w
                arg_descs = self._ship_args(w, spec)
                self._send(w, (protocol.CALL, spec.task_id, spec.method, spec.args_desc, arg_descs,
                               spec.return_ids, spec.num_returns, spec.name))
        for key in [k for k, q in actor.queues.items() if not q]:
            del actor.queues[key]

    def _actor_died(self, actor, error, kill=False):
        if actor.state == "DEAD":
            return
        actor.state = "DEAD"
        actor.death_error = error
        w = actor.worker
        if w is not None:
            self._release_actor_resources(actor)
            if kill and not w.dead and w.pid:
                self._kill_pid(w.pid)
        for spec in list(actor.in_flight.values()):
            self._complete_with_error(spec, error)
        actor.in_flight.clear()
        for q in actor.queues.values():
            for spec in q:
                self._complete_with_error(spec, error)
        actor.queues.clear()
        if actor.create_spec is not None:
            self._task_finished(actor.create_spec)
            actor.create_spec = None

    def _release_actor_resources(self, actor):
        spec = actor.create_spec
        if actor.resources and actor.worker is not None and not getattr(actor, "_released", False):
            actor._released = True
            if spec is not None and spec.pg:
                self._pg_release(spec)
            else:
                self._release(actor.resources)
            self._give_gpus(actor.gpu_ids, actor.resources.get("GPU", 0))
            self._retry_pending_actor_starts()
            self._schedule()

    def on_worker_died(self, w, reason):
        """A worker process ended: its calls fail, retry or restart; then the reactor in front hears of it."""
        self._settle_dead_worker(w, reason)
        if self._reactor is not None:
            self._reactor.worker_died(w)

    def _settle_dead_worker(self, w, reason):
        w.dead = True
        if w.pid and not w.bell.asleep():
            channel.forget_awake_process()   # it died awake: it no longer wants a core
        if w.from_ring in self._rings:
            self._rings.remove(w.from_ring)
            self.poller.set_rings(self._rings)
        for req in [k for k in self.get_waiters if k[0] == w.index]:
            self.get_waiters.pop(req, None)
        self.object_table.forget_borrower(w.index)
        if w.kind == "task":
            # Tasks sent behind the running one never started: they run elsewhere, no retry spent.
            while w.pipelined:
                queued = w.pipelined.pop()
                queued.worker = None
                self.task_queue.appendleft(queued)
            spec = w.task
            w.task = None
            if spec is not None:
                self._release_task_resources(spec)
                if spec.cancelled:
                    self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
                elif spec.retries_left > 0:
                    spec.retries_left -= 1
                    spec.worker = None
                    self.task_queue.append(spec)
                else:
                    self._complete_with_error(spec, exceptions.WorkerCrashedError(
                        f"The worker died unexpectedly while executing this task ({spec.name}). {reason}"))
            self.object_table.owner_died(w.index)
            self._schedule()
        else:
            actor = w.actor
            self.object_table.owner_died(w.index)
            if actor is None or actor.state == "DEAD":
                self._cleanup_worker_files(w)
                return
            exiting = getattr(w, "exiting", False)
            if not exiting and not actor.no_restart and (actor.restarts_left != 0):
                self._restart_actor(actor, w, reason)
            else:
                msg = (f"The actor {actor.class_name} (id={actor.actor_id.hex()}) died. {reason}" if not exiting else
                       f"The actor {actor.class_name} is dead because its worker process exited by a user "
                       "request: exit_actor() is called (or __ray_terminate__).")
                if actor.no_restart and getattr(actor, "killed", False):
                    msg = f"The actor {actor.class_name} was killed by ray.kill(). {reason}"
                self._actor_died(actor, exceptions.ActorDiedError(error_msg=msg))
        self._cleanup_worker_files(w)

    def _cleanup_worker_files(self, w):
        for p in w.paths:
            try:
                os.unlink(p)
            except OSError:
                pass

    def _restart_actor(self, actor, w, reason):
        if actor.restarts_left > 0:
            actor.restarts_left -= 1
        actor.num_restarts += 1
        actor.state = "RESTARTING"
        err = exceptions.ActorDiedError(error_msg=f"The actor {actor.class_name} died while running this call "
                                                  f"and is being restarted. {reason}")
        for spec in list(actor.in_flight.values()):
            if spec.retries_left != 0:
                if spec.retries_left > 0:
                    spec.retries_left -= 1
                key = spec.caller.index if spec.caller is not None else -1
                actor.queues.setdefault(key, collections.deque()).appendleft(spec)
            else:
                self._complete_with_error(spec, err)
        actor.in_flight.clear()
        self._release_actor_resources(actor)
        actor._released = False
        actor.worker = None
        self._start_actor(actor.create_spec)

    # ================================================================== kill / cancel / named actors
    def kill_actor(self, actor_id, no_restart=True):
        with self._lock:
            self._kill_locked(actor_id, no_restart)

    def _kill_locked(self, actor_id, no_restart):
        actor = self.actors.get(actor_id)
        if actor is None or actor.state == "DEAD":
            return
        if no_restart:
            actor.no_restart = True
            actor.killed = True
            # Dead from now on, as in Ray: later calls fail at once, even before the process is gone.
            self._actor_died(actor, exceptions.ActorDiedError(
                error_msg=f"The actor {actor.class_name} (id={actor.actor_id.hex()}) was killed by ray.kill()."),
                kill=True)
            return
        w = actor.worker
        if w is not None and not w.dead and w.pid:
            self._kill_pid(w.pid)

    def _kill_pid(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self._zygote_command(("kill", pid))

    def cancel(self, object_id, force=False, recursive=True):
        with self._lock:
            self._cancel_locked(object_id, force)

    def _cancel_locked(self, object_id, force):
        for spec in list(self.task_queue):
            if object_id in spec.return_ids:
                spec.cancelled = True
                self.task_queue.remove(spec)
                self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
                return
        for w in self.task_workers:
            for spec in (w.task, *w.pipelined):
                if spec is None or object_id not in spec.return_ids or w.dead:
                    continue
                spec.cancelled = True
                if force and spec is w.task:
                    self._zygote_command(("kill", w.pid))
                else:
                    # The message first: a worker that has not started the task yet finds it and skips it.
                    # The tag next: a SIGINT meant for this task must not stop the one it was sent behind.
                    self._send(w, (protocol.CANCEL, spec.task_id))
                    self._flush_outboxes()
                    w.bell.cancel_task(ids.tag64(spec.task_id))
                    self.interrupt(w, lambda w=w, spec=spec: w.task is spec)
                return
        found = self._actor_call_returning(object_id)
        if found is not None:
            actor, spec, queue = found
            if force:
                raise ValueError("force=True is not supported for actor tasks.")
            if queue is not None:
                queue.remove(spec)
                self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
                return
            # As in Ray: an actor call already with its actor is not interrupted (actors have state), but
            # sees is_canceled(), an async one has its coroutine cancelled, and its result becomes
            # TaskCancelledError (see _on_done).
            spec.cancelled = True
            if actor.worker is not None and not actor.worker.dead:
                self._send(actor.worker, (protocol.CANCEL, spec.task_id))
                self._flush_outboxes()
            return
        self._cancel_waiting(object_id)

    def _actor_call_returning(self, object_id):
        """(actor, call, the queue it waits in, or None once it is with its actor), or None."""
        for actor in self.actors.values():
            for queue in actor.queues.values():
                for spec in queue:
                    if object_id in spec.return_ids:
                        return actor, spec, queue
            for spec in actor.in_flight.values():
                if object_id in spec.return_ids:
                    return actor, spec, None
        return None

    def interrupt(self, w, still_running):
        """SIGINT to ``w``'s task code, now and again (~5/s) until it takes one or ``still_running()`` is False.

        A signal that lands just before a blocking call is seen only once the call returns: hence the repeats."""
        with self._lock:
            self._interrupting[w.index] = (still_running, w.bell.interrupts())
        _interrupt_main_thread(w.pid)

    def _interrupt_again(self):
        """Re-send SIGINT to cancelled tasks whose worker has not taken one since (service thread)."""
        for index, (still_running, seen) in list(self._interrupting.items()):
            w = self.workers.get(index)
            if w is None or w.dead or not still_running() or w.bell.interrupts() != seen:
                del self._interrupting[index]
            else:
                _interrupt_main_thread(w.pid)

    def _cancel_waiting(self, object_id):
        """Cancel a task still waiting for its arguments (it runs never: _enqueue_task skips it)."""
        spec = self._waiting_for_args.get(object_id)
        if spec is None or spec.cancelled:
            return
        for rid in spec.return_ids:
            self._waiting_for_args.pop(rid, None)
        spec.cancelled = True
        self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))

    def get_actor_info(self, name, namespace=None):
        with self._lock:
            actor_id = self.named_actors.get((namespace or self.namespace, name))
            if actor_id is None or self.actors[actor_id].state == "DEAD":
                return None
            a = self.actors[actor_id]
            return (a.actor_id, a.class_name, a.methods)

    def list_named_actors(self, all_namespaces=False):
        with self._lock:
            out = []
            for (ns, name), aid in self.named_actors.items():
                if self.actors[aid].state == "DEAD":
                    continue
                if all_namespaces:
                    out.append({"name": name, "namespace": ns})
                elif ns == self.namespace:
                    out.append(name)
            return out

    def resources(self, which):
        with self._lock:
            return self._resources_locked(which)

    def _resources_locked(self, which):
        if which == "total":
            view = dict(self.total)
        else:
            # A task blocked in get lends its CPU to nested work, but Ray still reports it as in use.
            view = dict(self.available)
            view["CPU"] = view.get("CPU", 0.0) - self._lent_cpu
            view = {k: v for k, v in view.items() if v > 1e-9}
        if self._placement is not None:
            view.update(self._placement.resource_view(which))
        return view

    # ================================================================== requests from workers
    def _on_request(self, w, req_id, verb, payload):
        if verb == protocol.V_SUBMIT_TASK:
            code_id, code, name, args_desc, direct, return_ids, num_returns, options = payload
            self.code.setdefault(code_id, code)
            self.object_table.worker_holds(w.index, return_ids)
            self._submit_task_locked(w, code_id, name, args_desc, direct, return_ids, num_returns, options)
        elif verb == protocol.V_SUBMIT_CALL:
            actor_id, method, args_desc, direct, return_ids, num_returns, task_name = payload
            self.object_table.worker_holds(w.index, return_ids)
            self._submit_call_locked(w, actor_id, method, args_desc, direct, return_ids, num_returns, task_name)
        elif verb == protocol.V_GET:
            object_ids, timeout = payload
            self._worker_get(w, req_id, object_ids)
        elif verb == protocol.V_WAIT:
            object_ids, num_returns, timeout = payload
            self._worker_wait(w, req_id, object_ids, num_returns, timeout)
        elif verb == protocol.V_PUT:
            oid, desc = payload
            self.object_table.reserve(oid, w.index)
            self.object_table.worker_holds(w.index, [oid])
            self.object_table.fill(oid, desc)
        elif verb == protocol.V_CREATE_ACTOR:
            (actor_id, code_id, code, class_name, methods, is_async, args_desc, direct, options) = payload
            self.code.setdefault(code_id, code)
            namespace = options.get("namespace") or self.namespace
            err = self._create_actor_locked(actor_id, code_id, class_name, methods, is_async, args_desc, direct,
                                            options, namespace)
            if err is not None:
                err = self._named_if_get_if_exists(options, namespace) or err
            if err is None:
                # The creating worker holds the first handle.
                self.object_table.worker_holds(w.index, [handles.key_of(actor_id)])
            self._reply(w, req_id, err)
        elif verb == protocol.V_KILL:
            self._kill_locked(payload[0], payload[1])
            self._reply(w, req_id, None)
        elif verb == protocol.V_CANCEL:
            self._cancel_locked(payload[0], payload[1])
            self._reply(w, req_id, None)
        elif verb == protocol.V_GET_ACTOR:
            name, namespace = payload
            actor_id = self.named_actors.get((namespace or self.namespace, name))
            if actor_id is None or self.actors[actor_id].state == "DEAD":
                self._reply(w, req_id, None)
            else:
                a = self.actors[actor_id]
                self._reply(w, req_id, (a.actor_id, a.class_name, a.methods))
        elif verb == protocol.V_RESOURCES:
            self._reply(w, req_id, self._resources_locked(payload))
        elif verb == protocol.V_NAMED_LIST:
            all_ns, ns = payload
            out = []
            for (n_s, name), aid in self.named_actors.items():
                if self.actors[aid].state != "DEAD" and (all_ns or n_s == ns):
                    out.append({"name": name, "namespace": n_s} if all_ns else name)
            self._reply(w, req_id, out)
        elif verb == protocol.V_STREAM_NEXT:
            stream_id, index, peek = payload
            result = self._stream_poll(stream_id, index, take=not peek, w=w)
            if result[0] == "pending" and not peek:
                self._stream(stream_id).waiters.append((w, req_id, index))
            else:
                self._reply(w, req_id, result)
        elif verb == protocol.V_STREAM_DROP:
            self._drop_stream(payload[0])
        elif verb == protocol.V_CANCEL_GET:
            state = self.get_waiters.pop((w.index, payload), None)
            if state is not None and state.get("blocked"):
                self._unblock(w)
        elif verb == protocol.V_PG:
            self._reply(w, req_id, self._placement_request(*payload))

    def _reply(self, w, req_id, payload):
        self._send(w, (protocol.REPLY, req_id, payload))

    def _worker_get(self, w, req_id, object_ids):
        missing = set()
        for oid in object_ids:
            e = self.objects.get(oid)
            if e is None:
                self.object_table.lost(oid)
            elif e.state != READY:
                missing.add(oid)
        if not missing:
            self._reply(w, req_id, [self.object_table.ship(w.index, self.objects[oid]) for oid in object_ids])
            return
        state = {"missing": missing, "blocked": False}
        key = (w.index, req_id)
        self.get_waiters[key] = state
        state["blocked"] = self._block(w)

        def on_ready(oid, e, key=key, w=w, object_ids=object_ids):
            st = self.get_waiters.get(key)
            if st is None:
                return
            st["missing"].discard(oid)
            if not st["missing"]:
                del self.get_waiters[key]
                if st["blocked"]:
                    self._unblock(w)
                self._reply(w, key[1], [self.object_table.ship(w.index, self.objects[o]) for o in object_ids])

        for oid in missing:
            self.object_table.when_ready(oid, on_ready)

    def _block(self, w):
        """A task blocked in get or wait gives its CPU back so nested work can run (as Ray does), and the
        tasks sent behind it back to the queue: True if ``w`` runs a task (then _unblock when it resumes)."""
        if w.kind != "task" or w.task is None:
            return False
        w.blocked += 1
        if not w.task.pg:
            cpu = w.task.resources.get("CPU", 0)
            self._lent_cpu += cpu
            self._release({"CPU": cpu})
        self._recall_pipelined(w)
        self._schedule()
        self._grow_pool(len(self.task_queue))
        return True

    def _unblock(self, w):
        w.blocked -= 1
        if w.task is not None and not w.task.pg:
            cpu = w.task.resources.get("CPU", 0)
            self._lent_cpu -= cpu
            self._acquire({"CPU": cpu})

    def _worker_wait(self, w, req_id, object_ids, num_returns, timeout):
        def flags():
            return [(e := self.objects.get(o)) is not None and e.state == READY for o in object_ids]

        current = flags()
        if sum(current) >= num_returns or timeout == 0:
            self._reply(w, req_id, current)
            return
        key = (w.index, ("wait", req_id))
        state = {"done": False}
        self.get_waiters[key] = state
        blocked = self._block(w)

        def finish():
            if state["done"]:
                return
            state["done"] = True
            if blocked:
                self._unblock(w)
            self.get_waiters.pop(key, None)
            self._reply(w, req_id, flags())

        def on_ready(oid, e):
            if not state["done"] and sum(flags()) >= num_returns:
                finish()

        for oid in object_ids:
            e = self.objects.get(oid)
            if e is not None and e.state != READY:
                self.object_table.when_ready(oid, on_ready)
        if timeout is not None:
            timer = threading.Timer(timeout, lambda: self._locked(finish))
            timer.daemon = True
            timer.start()

    def _locked(self, fn):
        with self._lock:
            if self._running:
                fn()
                self._flush_outboxes()

    # ================================================================== placement groups (accounting only)
    def _pg_of(self, options):
        strategy = options.get("scheduling_strategy")
        pg = options.get("placement_group")
        index = options.get("placement_group_bundle_index", -1)
        capture = bool(options.get("placement_group_capture_child_tasks"))
        if strategy is not None and hasattr(strategy, "placement_group"):
            pg = strategy.placement_group
            index = getattr(strategy, "placement_group_bundle_index", -1)
            capture = bool(getattr(strategy, "placement_group_capture_child_tasks", False))
        if pg is None or pg == "default":
            return None
        return (pg.id.binary() if hasattr(pg.id, "binary") else pg.id, -1 if index is None else index, capture)

    def _check_pg_request(self, pg, demand, what):
        """Ray rejects at submission a request that no bundle of the group could ever hold."""
        group = self._ledger()._groups.get(pg[0])
        if group is None:
            return
        n = len(group.bundles)
        if pg[1] >= n or pg[1] < -1:
            raise ValueError(f"placement group bundle index {pg[1]} is invalid. Valid placement group indexes: "
                             f"0-{n - 1}")
        choices = range(n) if pg[1] == -1 else [pg[1]]
        if not any(all(group.bundles[i].get(k, 0.0) + 1e-9 >= v for k, v in demand.items() if v) for i in choices):
            raise ValueError(f"Cannot schedule {what} with the placement group because the resource request "
                             f"{dict(demand)} cannot fit into any bundles for the placement group, "
                             f"{[dict(b) for b in group.bundles]}.")

    def _pg_info(self, spec):
        if not spec.pg:
            return None
        return (spec.pg[0].hex(), spec.pg[2] if len(spec.pg) > 2 else False)

    def _ledger(self):
        if self._placement is None:
            from . import pg_accounting as _pg_accounting
            self._placement = _pg_accounting.ResourceLedger(self)
        return self._placement

    def _pg_fits(self, spec):
        return self._ledger().can_acquire(spec.pg[0], spec.pg[1], spec.resources if not spec.is_create else
                                           self.actors[spec.actor_id].resources)

    def _pg_acquire(self, spec):
        res = spec.resources if not spec.is_create else self.actors[spec.actor_id].resources
        spec.pg = (spec.pg[0], self._ledger().acquire(spec.pg[0], spec.pg[1], res)) + tuple(spec.pg[2:])

    def _pg_release(self, spec):
        res = spec.resources if not spec.is_create else self.actors[spec.actor_id].resources
        self._ledger().release(spec.pg[0], spec.pg[1], res)

    def _placement_request(self, verb, payload):
        result = self._ledger().handle(verb, payload)
        if verb == "remove":
            self._evict_group(payload)
        self._retry_pending_actor_starts()
        self._schedule()
        return result

    def _evict_group(self, pg_id):
        """A removed placement group takes its actors and running tasks with it, as in Ray."""
        for actor in list(self.actors.values()):
            spec = actor.create_spec
            if actor.state != "DEAD" and spec is not None and spec.pg and spec.pg[0] == pg_id:
                actor.no_restart = True
                self._actor_died(actor, exceptions.ActorDiedError(
                    error_msg=f"The actor {actor.class_name} died because its placement group was removed."),
                    kill=True)
        for spec in list(self.task_queue):
            if spec.pg and spec.pg[0] == pg_id:
                self.task_queue.remove(spec)
                self._complete_with_error(spec, exceptions.TaskPlacementGroupRemoved())
        for w in self.workers.values():
            spec = w.task
            if spec is not None and spec.pg and spec.pg[0] == pg_id and not w.dead and w.pid:
                spec.retries_left = 0
                self._kill_pid(w.pid)

    def placement_group_call(self, verb, payload):
        with self._lock:
            return self._placement_request(verb, payload)

    # ================================================================== actor lifetime (handles)
    # Handles count like refs (core.handles): the entry under the actor's handle key lives while any process
    # holds a handle or a value in flight nests one.  When it goes, an unnamed, non-detached actor finishes
    # its queued calls and exits, as in Ray.
    def _track_handles(self, actor_id):
        self.object_table.add_ready(handles.key_of(actor_id), (INLINE, b"", [], False))

    def _handles_gone(self, actor_id):
        # Named actors too: Ray 2.x collects them like any other; only detached ones live on.
        actor = self.actors.get(actor_id)
        if actor is None or actor.state == "DEAD" or actor.options.get("lifetime") == "detached":
            return
        actor.out_of_scope = True
        self._maybe_retire(actor)

    def _maybe_retire(self, actor):
        if not actor.out_of_scope or actor.state == "DEAD":
            return
        if actor.in_flight or any(actor.queues.values()):
            return
        if handles.key_of(actor.actor_id) in self.objects:
            # A counted handle reappeared (a lost copy was held again): wait until it goes too.
            actor.out_of_scope = False
            return
        error = exceptions.ActorDiedError(
            error_msg=f"The actor {actor.class_name} is dead because all references to it went out of scope.")
        if actor.state != "ALIVE":
            # Not started yet (or restarting): as Ray cancels its creation, stop it wherever it is.
            self._actor_died(actor, error, kill=True)
            return
        w = actor.worker
        self._actor_died(actor, error)
        if w is not None and not w.dead:
            w.exiting = True
            self._send(w, (protocol.EXIT, "out_of_scope"))     # a graceful end: __ray_shutdown__, atexit

    # ================================================================== shutdown
    def shutdown(self):
        if not self._running:
            return
        with self._lock:
            self._shutting_down = True
            for w in self.workers.values():
                if not w.dead:
                    self._send(w, (protocol.EXIT,))
            self._flush_outboxes()
        self._running = False
        channel.stop_counting_awake()
        self.bell.ring()
        self._service.join(timeout=2)
        self._zygote_command(("shutdown",))
        try:
            self.zygote.stdin.close()
        except OSError:
            pass
        try:
            self.zygote.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.zygote.kill()
            self.zygote.wait()
        # The zygote removed the session's files; remove anything it could not (e.g. if it died first).
        leftovers.remove_session_files(self.shm_dir, self.session)
        os.close(self._session_lock)
        shutil.rmtree(self.shm_dir, ignore_errors=True)
        if self.spill_dir:
            os.close(self._spill_lock)
            shutil.rmtree(self.spill_dir, ignore_errors=True)
        spilling.reset()
        self.object_table.clear()
        serialization.snapshots.clear()
        serialization.segment_pool.clear()
        refcount.reset()

    # ================================================================== runtime protocol (core.runtime_api)
    # The rest of RuntimeAPI: the methods above, and what core.runtime_api.RuntimeBase shares.
    def runtime_info(self):
        from .runtime_api import RuntimeInfo
        return RuntimeInfo(job_id=self.job_id, node_id=self.node_id, namespace=self.namespace)


class _StreamState:
    __slots__ = ("held", "pending_handoff", "waiters", "done", "dropped", "dynamic")

    def __init__(self):
        self.held = set()            # yielded values not yet handed out as refs
        self.pending_handoff = []
        self.waiters = []            # (worker, req_id, index) of nested consumers
        self.done = False
        self.dropped = False
        self.dynamic = False


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


def _raise_open_file_limit():
    """As Ray does at init: the soft open-file limit up to the hard one (a session may run many actors)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > 1 << 20:
            hard = 1 << 20
        if soft != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    except (ValueError, OSError):
        pass


def _detect_gpus():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([x for x in visible.split(",") if x.strip()])
    try:
        return len([d for d in os.listdir("/proc/driver/nvidia/gpus")])
    except OSError:
        return 0


def _total_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024 ** 3


def _default_store_memory():
    mem = _total_memory() * 0.3
    try:
        st = os.statvfs("/dev/shm")
        mem = min(mem, st.f_bavail * st.f_frsize * 0.95)
    except OSError:
        pass
    return int(max(mem, 78 * 1024 * 1024))
