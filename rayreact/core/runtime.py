"""The driver runtime: the facade of the runtime protocol, and the pump that routes every message.

::

    user thread ──.remote()──▶ Runtime.submit_* ──▶ task pool (core.task_pool): queue ──▶ idle pool worker
                                                └─▶ actor table (core.actors): per-caller FIFOs ──▶ its worker
                                                      (both once the arguments are ready: core.calls)
                                  ring D→W (or the outbox while the ring is full: core.processes) ──▶ worker
    worker ──ring W→D──▶ _pump() ──▶ DONE: task pool / actor table ──▶ objects (core.objects)
                              │                                         ◀── get()/wait() of user threads
                              ├──▶ REQUEST: nested submit/get/put/... (core.worker_requests)
                              ├──▶ STREAM_ITEM: generator items (core.streams)
                              └──▶ RELEASE: refs a worker dropped
    zygote ──ring Z→D──▶ _pump() ──▶ SPAWNED / DIED ──▶ on_worker_died: retries, restarts (task pool, actors)
    resources, GPU ids, placement groups' bundles: core.node_resources (and core.pg_accounting)

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

The components (built in this order; each binds, once, what it uses of those before it):

    node         core.node_resources.NodeResources  total/available, GPU ids, placement-group grants
    procs        core.processes.Processes        the zygote, worker processes, rings, send/reply, SIGINT
    streams      core.streams.Streams            generator streams
    calls        core.calls.Calls                arguments held and awaited, returns completed
    task_pool    core.task_pool.TaskPool         pool workers, queue, scheduling, pipelining, lending
    actor_table  core.actors.ActorTable          actors: start, calls, death, restart, kill, names, handles
    requests     core.worker_requests.WorkerRequests   REQUEST messages from workers

What they may use of the runtime (their interface to it): the components above, ``lock``, ``object_table``,
``code`` (code id -> pickled code), ``wait_until``, ``cancel_locked``, ``placement_request``, ``running``
and the session facts (``session``, ``namespace``, ``job_id``, ``node_id``, ``env``, ``log_to_driver``,
``shm_dir``, ``spill_dir``, ``store_limit``, ``bell``, ``tracing``).  None imports this module.  Two
callbacks reach a component built after the one calling them, so they look it up when called (both rare):
the node's ``on_groups_placed`` and the object table's ``on_handles_gone``, both the actor table's.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import threading
import time
import warnings

from .. import exceptions
from .refs import ObjectRef
from .runtime_api import DriverRuntimeBase
from . import channel, ids, leftovers, wire, refcount, serialization, session_dir, submission
from .spilling import spilling
from .colocation import Colocation
from .objects import READY, ObjectTable
from .processes import SPIN_SECONDS, Processes
from .node_resources import NodeResources
from .streams import Streams
from .calls import Calls
from .task_pool import TaskPool
from .actors import ActorTable
from .worker_requests import WorkerRequests

logger = logging.getLogger("rayreact")

__all__ = ["Runtime", "READY"]


class Runtime(DriverRuntimeBase):
    """Everything ``init`` starts.  One per driver process."""

    is_driver = True
    local_mode = False
    is_actor = False

    def __init__(self, *, num_cpus=None, num_gpus=None, resources=None, object_store_memory=None,
                 namespace=None, runtime_env=None, log_to_driver=True, default_actor_lifetime=None,
                 colocate=False):
        _raise_open_file_limit()
        self.namespace = namespace or f"anon-{os.urandom(4).hex()}"
        self.default_actor_lifetime = default_actor_lifetime or "non_detached"   # (JobConfig's)
        self.job_id = b"\x01\x00\x00\x00"
        self.node_id = os.urandom(28)
        self.log_to_driver = log_to_driver
        self.env = dict((runtime_env or {}).get("env_vars") or {})
        self.num_cpus, self.num_gpus, total = _node_totals(num_cpus, num_gpus, resources, object_store_memory)
        # (a pending placement group placed when resources come back may let an actor start)
        self.node = NodeResources(total, self.num_gpus, self.node_id,
                                  on_groups_placed=lambda: self.actor_table.retry_pending_starts())
        self._configure_store(object_store_memory)

        self._lock = threading.RLock()
        self.code = {}                     # code_id -> pickled code
        self._shutting_down = False
        self.running = True
        self.tracing = bool(os.environ.get("RAYREACT_TRACE"))

        # Files of sessions whose processes were all killed at once go now; ours are covered by our lock
        # before the first of them exists (see core.leftovers).
        leftovers.sweep()
        self._session_lock = leftovers.hold_session_lock(self.shm_dir, self.session)
        self._spill_lock = leftovers.hold_session_lock(self.spill_dir, self.session) if self.spill_dir else None
        prefix = os.path.join(self.shm_dir, f"rr-{self.session}")
        self._prefix = prefix
        self.bell = channel.Doorbell(f"{prefix}-driver-bell", True)
        self.spin_seconds = SPIN_SECONDS     # how long a waiter spins before it sleeps (replay programs copy it)
        channel.set_spin_seconds(SPIN_SECONDS)
        channel.count_awake_on(self.bell, True)
        self.object_table = ObjectTable(
            self._lock, session=self.session, bell=self.bell, store_limit=self.store_limit, spill_dir=self.spill_dir,
            on_handles_gone=lambda actor_id: self.actor_table.handles_gone(actor_id))
        self.objects = self.object_table.entries      # read here; entries change only through object_table
        spilling.configure(self.shm_dir, self.spill_dir, self.store_limit, self.object_table.shared_memory_used)
        serialization.segment_pool.spill_dir = self.spill_dir
        procs = self.procs = Processes(self, prefix)
        # Opt-in: actors share host processes, about one per core (core.colocation, core.hosting).
        self.colocation = Colocation(procs, self.num_cpus) if colocate else None
        self.poller = procs.poller
        self.workers = procs.workers       # index -> WorkerProc
        self.zygote = procs.start_zygote(self._session_lock)
        self.streams = Streams(self.object_table, procs.reply, self._lock, self.wait_until)
        self.calls = Calls(self.object_table)
        self.task_pool = TaskPool(self, max(1, int(self.num_cpus)))
        self.actor_table = ActorTable(self)
        self.actors = self.actor_table.actors
        self.named_actors = self.actor_table.named
        self.requests = WorkerRequests(self)
        # The message handlers, bound once: the pump calls them per message.
        self._send = procs.send
        self._flush_outboxes = procs.flush_outboxes
        self._on_request = self.requests.on_request
        self._on_stream_item = self.streams.on_item
        self._task_done = self.task_pool.on_done
        self._actor_done = self.actor_table.on_done
        self._submit_task = self.task_pool.submit
        self._submit_call = self.actor_table.submit_call
        self._reactor = None           # the replay engine in front of this runtime, if any (attach_reactor)
        self._service = threading.Thread(target=self._service_loop, name="rayreact-service", daemon=True)
        self._service.start()
        # Prestart the task pool (as Ray does): forks are cheap and the first task then finds a warm worker.
        with self._lock:
            for _ in range(min(self.task_pool.pool_target, os.cpu_count() or 1)):
                self.task_pool.spawn_worker()

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
        return self.task_pool.pool_target

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

    def send_to_worker(self, w, msg):
        """Send ``msg`` to worker ``w`` (in order after every message the runtime sent it before)."""
        with self._lock:
            self._send(w, msg)

    def interrupt(self, w, still_running):
        """SIGINT to ``w``'s task code, now and again (~5/s) until it takes one or ``still_running()`` is False.

        A signal that lands just before a blocking call is seen only once the call returns: hence the repeats."""
        self.procs.interrupt(w, still_running)

    def lendable_task_workers(self):
        """Started pool workers that run nothing and are lent to no replay, least recently used first."""
        return self.task_pool.lendable()

    def pin_task_workers(self, count, code_ids):
        """Lend ``count`` idle, started task workers to a replay (with ``code_ids`` defined on each), or
        None if that many are not idle now.  Caller holds the lock."""
        return self.task_pool.pin(count, code_ids)

    def lend_host_to_tasks(self, host, code_ids):
        """Co-location: a replay runs task calls (of ``code_ids``) in ``host``'s process.  Caller holds the lock."""
        host.pinned = True
        for code_id in code_ids:
            self.procs.ensure_defined(host, code_id)

    def unpin_task_worker(self, w):
        """A replay gives a task worker back to the pool.  Caller holds the lock."""
        self.task_pool.unpin(w)

    def on_worker_died(self, w, reason):
        """A worker process ended: its calls fail, retry or restart; then the reactor in front hears of it."""
        w.dead = True
        self.procs.forget(w)
        self.requests.forget_worker(w)
        self.object_table.forget_borrower(w.index)
        if w.kind == "task":
            self.task_pool.worker_died(w, reason)
        else:
            self.actor_table.worker_died(w, reason)
        self.actor_table.owner_died(w)
        self.procs.remove_files(w)
        if self._reactor is not None:
            self._reactor.worker_died(w)
        if w.host is not None:
            w.host.guests.discard(w)
            w.from_ring.mark_closed()        # a guest still running its call ends at its next write
        for guest in list(w.guests):         # a host process died: every actor it hosted with it
            if not guest.dead:
                for raw in guest.from_ring.read_all():
                    self._on_worker_message(guest, wire.decode(raw))
                self.on_worker_died(guest, f"{reason} (the process hosted it with other actors: co-location)")

    # ================================================================== for the components (lock held)
    def cancel_locked(self, object_id, force):
        """Cancel the call returning ``object_id``: queued or running task, actor call, or one still
        waiting for its arguments."""
        if self.task_pool.cancel(object_id, force):
            return
        if self.actor_table.cancel(object_id, force):
            return
        self.calls.cancel_waiting(object_id)

    def placement_request(self, verb, payload):
        """One request of ``rayreact.util.placement_group`` (core.pg_accounting's ``handle``); a removed
        group takes its actors and tasks with it, as in Ray."""
        result = self.node.ledger().handle(verb, payload)
        if verb == "remove":
            self.actor_table.evict_group(payload)
            self.task_pool.evict_group(payload)
        self.actor_table.retry_pending_starts()
        self.task_pool.schedule()
        return result

    def _reactor_owns(self, oid):
        """Whether the replay engine in front (core.replay) handed out ``oid``."""
        return self._reactor is not None and self._reactor.knows(oid)

    # ================================================================== pumping
    def _pump(self):
        """Handle every message waiting on any inbound ring.  Caller holds the lock."""
        progressed = False
        for w, ring in self.procs.readable():
            if w is None:
                for msg in ring.read_all():
                    self._on_zygote(wire.decode(msg))
                progressed = True
                continue
            if w.dead:
                continue
            while True:
                raw = ring.read()
                if raw is None:
                    break
                progressed = True
                self._on_worker_message(w, wire.decode(raw))
        if refcount.released:
            self.object_table.release_dropped()
        self._flush_outboxes()
        return progressed

    def _service_loop(self):
        procs = self.procs
        while self.running:
            try:
                self.poller.wait(0.2, True)
                if not self.running:
                    return
                with self._lock:
                    if self.running:
                        if self._pump():
                            self.bell.ring()     # a waiter may have looked just before we took its message
                        self._check_dead_workers()
                        if procs.interrupting:
                            procs.interrupt_again()
            except Exception:  # never let the service thread die silently
                if self.running:
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
            self.zygote = self.procs.start_zygote(self._session_lock)
            for w in orphans:
                if w.pid:
                    self.procs.kill_pid(w.pid)
                self.on_worker_died(w, "The worker's parent, the rayreact zygote process, died.")

    def _on_zygote(self, msg):
        kind = msg.KIND
        if kind == wire.SPAWNED:
            self.procs.spawned(msg.worker_index, msg.pid)
        elif kind == wire.DIED:
            w = self.procs.died(msg.pid)
            if w is not None and not w.dead:
                # Drain what it managed to send before dying.
                for raw in w.from_ring.read_all():
                    self._on_worker_message(w, wire.decode(raw))
                status = msg.status
                how = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else \
                    f"exited with code {os.WEXITSTATUS(status)}"
                self.on_worker_died(w, f"The worker process (pid={w.pid}) {how}.")

    def _on_worker_message(self, w, msg):
        kind = msg.KIND
        if kind == wire.DONE:
            if w.kind == "actor":
                self._actor_done(w, msg.task_id, msg.results, msg.ok)
            else:
                self._task_done(w, msg.task_id, msg.results, msg.ok)
        elif kind == wire.REQUEST:
            self._on_request(w, msg.req_id, msg.verb, msg.payload)
        elif kind == wire.RELEASE:
            self.object_table.worker_released(w.index, msg.counts)
        elif kind == wire.STREAM_ITEM:
            self._on_stream_item(w, msg.object_id, msg.desc, msg.keep)
        elif kind == wire.READY:
            w.ready = True
            if w.pid is None:
                w.pid = msg.pid              # a guest (its host's pid): the zygote forked nothing for it
            if w.kind == "task" and w.task is None:
                self.task_pool.worker_ready(w)
        elif kind == wire.EXITING:
            w.exiting = not w.killed         # (a killed guest says it exits, as it is told to)
        elif kind == wire.ENDED:
            if not w.dead:                   # a guest's thread ended; its host process lives on
                self.on_worker_died(w, f"The actor's thread in its host process (pid={w.pid}) ended "
                                       f"with code {msg.code}.")
        elif kind == wire.DROPPED:
            self.task_pool.on_given_back(w, msg.task_id)

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

    # ================================================================== public API: generator tasks
    def stream_next(self, stream_id, index, timeout, peek=False):
        return self.streams.next(stream_id, index, timeout, peek)

    def stream_drop(self, stream_id, index):
        with self._lock:
            self.streams.drop(stream_id)

    # ================================================================== public API: tasks
    def submit_task(self, remote_function, args, kwargs, options, return_ids=None):
        """``return_ids``: ids the caller already handed out for this call's returns (a replayed task
        whose worker died runs again under the refs the script holds)."""
        num_returns = submission.num_returns_of(options, remote_function._default_num_returns)
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        code_id, code = submission.code_of(remote_function)
        pg = self.node.pg_of(options)
        if pg is not None:
            with self._lock:
                self.node.check_pg_request(pg, submission.task_resources(options, 1),
                                           remote_function._function.__qualname__)
        if return_ids is None:
            return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        with self._lock:
            if code_id not in self.code:
                self.code[code_id] = code
            self._submit_task(None, code_id, remote_function._function_name, args_desc, direct,
                              return_ids, num_returns, options, pg)
        return submission.as_returns(refs, num_returns)

    # ================================================================== public API: actors
    def create_actor(self, actor_class, args, kwargs, options):
        return self.actor_table.create(actor_class, args, kwargs, options)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        num_returns = submission.normalize_num_returns(num_returns)
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        with self._lock:
            self._submit_call(None, handle._actor_id, info.name, args_desc, direct, return_ids, num_returns,
                              info.task_name)
        return submission.as_returns(refs, num_returns)

    def resubmit_actor_call(self, actor_id, method, args, kwargs, num_returns, return_ids, retries_left):
        """Send again a call the caller made to an actor whose process died before the call finished (a
        replayed call of an actor with ``max_task_retries``): under the ids its refs already name, with
        ``retries_left`` of its retries, queued behind the actor's restart as Ray retries it."""
        args_desc, direct = submission.pack_args(args, kwargs, self.session)
        with self._lock:
            self._submit_call(None, actor_id, method, args_desc, direct, list(return_ids), num_returns,
                              retries_left=retries_left)

    # ================================================================== public API: kill / cancel / named actors
    def kill_actor(self, actor_id, no_restart=True):
        with self._lock:
            self.actor_table.kill(actor_id, no_restart)

    def cancel(self, object_id, force=False, recursive=True):
        with self._lock:
            self.cancel_locked(object_id, force)

    def get_actor_info(self, name, namespace=None):
        with self._lock:
            return self.actor_table.info(name, namespace or self.namespace)

    def list_named_actors(self, all_namespaces=False):
        with self._lock:
            return self.actor_table.named_list(all_namespaces, self.namespace)

    # ================================================================== public API: resources, placement groups
    def resources(self, which):
        with self._lock:
            return self.node.view(which)

    def placement_group_call(self, verb, payload):
        with self._lock:
            return self.placement_request(verb, payload)

    # ================================================================== shutdown
    def finish_submitted(self, timeout):
        deadline = time.monotonic() + timeout
        objects = self.objects
        while True:
            with self._lock:
                pending = self.object_table.pending_ids()
            if not pending:
                return 0

            def produced():
                # A produced value nobody names is freed at once: gone counts as done.
                return all((e := objects.get(oid)) is None or e.state == READY for oid in pending)

            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.wait_until(produced, remaining):
                with self._lock:
                    return len(self.object_table.pending_ids())
            # What finished may have submitted more (a task's own fire-and-forget calls): look again.

    def shutdown(self):
        if not self.running:
            return
        with self._lock:
            self._shutting_down = True
            for w in self.workers.values():
                if not w.dead:
                    self._send(w, wire.Exit(False))
            self._flush_outboxes()
        self.running = False
        channel.stop_counting_awake()
        self.bell.ring()
        self._service.join(timeout=2)
        self.procs.stop_zygote()
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


def _node_totals(num_cpus, num_gpus, resources, object_store_memory):
    """(CPUs, GPUs, the node's total resources in Ray's names)."""
    num_cpus = float(os.cpu_count() or 1) if num_cpus is None else float(num_cpus)
    num_gpus = float(_detect_gpus() if num_gpus is None else num_gpus)
    total = {"CPU": num_cpus, "memory": float(_total_memory() * 0.3),
             "object_store_memory": float(object_store_memory or _default_store_memory())}
    if num_gpus:
        total["GPU"] = num_gpus
    total["node:127.0.0.1"] = 1.0
    total["node:__internal_head__"] = 1.0
    for k, v in (resources or {}).items():
        total[k] = float(v)
    return num_cpus, num_gpus, total


def _raise_open_file_limit():
    """As Ray does at init: the soft open-file limit up to the hard one (a session may run many actors)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
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
