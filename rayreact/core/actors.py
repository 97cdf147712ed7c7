"""The actor table: every actor's state, its calls' per-caller FIFOs, its start, death, restart and end.

::

    create() / create_locked() ──▶ ActorState PENDING ──(args ready, resources: start())──▶ its own worker
        ── DONE "create:" ──▶ ALIVE ──▶ pump(): the head of each caller's FIFO is sent as a CALL
    submit_call() ──▶ actor.queues[caller] ──pump()──▶ actor.in_flight ── DONE ──▶ on_done(): returns filled
    worker died ──▶ worker_died(): restart (calls re-queued) or died(): every call fails with the death error
    handles all gone (core.handles, via the object table) ──▶ handles_gone() ──▶ maybe_retire(): EXIT

``rt`` is the runtime (core.runtime); at construction this binds what it uses of it: ``procs``
(core.processes), ``calls``, ``node``, ``task_pool``, ``streams``, ``object_table``, ``code`` and
``colocation``; it reads
``lock``, ``session``, ``namespace`` and ``tracing`` when it creates an actor, and calls ``on_worker_died``
for a co-located actor's worker it kills (a guest ends only once its call returns).  ``actors`` (id -> ActorState) and ``named`` ((namespace, name) -> id) are
read by the runtime and the replay engine (core.replay) too.  Everything runs under the runtime's lock,
except ``create``, which takes it.
"""

from __future__ import annotations

import collections
import warnings

from .. import exceptions
from . import handles, ids, wire, refcount, serialization, submission
from .calls import TaskSpec
from .objects import READY
from .serialization import INLINE


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
        self.owner = None                # the worker (index) that created it; None: the driver
        self.detached = options.get("lifetime") == "detached"


class ActorTable:
    def __init__(self, rt):
        self._rt = rt                    # (its session facts: lock, session, namespace, tracing)
        procs = rt.procs
        self._procs = procs
        self._send = procs.send
        calls = rt.calls
        self._hold_args = calls.hold_args
        self._when_args_ready = calls.when_args_ready
        self._failed_dependency = calls.failed_dependency
        self._ship_args = calls.ship_args
        self._task_finished = calls.task_finished
        self._complete_with_desc = calls.complete_with_desc
        self._complete_with_error = calls.complete_with_error
        self._node = rt.node
        self._tasks = rt.task_pool
        self._streams = rt.streams
        self._table = rt.object_table
        self._objects = rt.object_table.entries
        self._code = rt.code
        self._colocation = rt.colocation     # None unless actors share host processes (opt-in)
        self.actors = {}
        self.named = {}
        self._pending_starts = collections.deque()   # creation specs waiting for resources

    # ================================================================== creation
    def create(self, actor_class, args, kwargs, options):
        """Runtime.create_actor (takes the lock)."""
        rt = self._rt
        name = options.get("name")
        namespace = options.get("namespace") or rt.namespace
        if rt.tracing:
            # One key per .remote() on an actor class, get_if_exists hits included (as the Ray-side tracer does).
            from .tracing import creating_actor_key
            options = {**options, "_trace_key": creating_actor_key(actor_class._cls.__name__)}
        with rt.lock:
            if name:
                # A handle the driver just dropped may be the last one of the actor holding this name: Ray frees
                # the name then, so count the drops before looking.
                self._table.release_dropped()
                existing = self.named.get((namespace, name))
                if existing is not None and self.actors[existing].state != "DEAD":
                    if options.get("get_if_exists"):
                        a = self.actors[existing]
                        return handles.new_handle(a.actor_id, a.class_name, a.methods, weak=True)
                    raise ValueError(f"The name {name} (namespace={namespace}) is already taken. Please use a "
                                     "different name or get the existing actor using "
                                     f"ray.get_actor('{name}', namespace='{namespace}')")
        pg = self._node.pg_of(options)
        if pg is not None:
            res = submission.task_resources(options, 0)
            with rt.lock:
                self._node.check_pg_request(pg, res or {"CPU": 1.0}, actor_class._cls.__qualname__)
        args_desc, direct = submission.pack_args(args, kwargs, rt.session)
        code_id, code = submission.code_of(actor_class)
        actor_id = ids.actor_id()
        with rt.lock:
            if code_id not in self._code:
                self._code[code_id] = code
            err = self.create_locked(actor_id, code_id, actor_class._cls.__name__, actor_class._methods,
                                     actor_class._is_async, args_desc, direct, options, namespace)
            if err is not None:
                found = self.named_if_get_if_exists(options, namespace)
                if found is not None:
                    return handles.new_handle(*found, weak=True)
                raise err
            handle = handles.new_handle(actor_id, actor_class._cls.__name__, actor_class._methods, original=True)
        return handle

    def named_if_get_if_exists(self, options, namespace):
        """get_if_exists, and another caller took the name since we looked: (id, class, methods) of its actor."""
        actor_id = self.named.get((namespace, options.get("name")))
        if not options.get("get_if_exists") or actor_id is None or self.actors[actor_id].state == "DEAD":
            return None
        a = self.actors[actor_id]
        return (a.actor_id, a.class_name, a.methods)

    def create_locked(self, actor_id, code_id, class_name, methods, is_async, args_desc, direct, options,
                      namespace, owner=None):
        """Register the actor and start it once its arguments are ready; a ValueError (returned) for a
        name taken.  ``owner``: the index of the worker creating it (None: the driver)."""
        name = options.get("name")
        if name:
            existing = self.named.get((namespace, name))
            if existing is not None and self.actors[existing].state != "DEAD":
                return ValueError(f"The name {name} (namespace={namespace}) is already taken.")
        actor = ActorState(actor_id, class_name, methods, code_id, self._code[code_id], options)
        actor.owner = owner
        if options.get("lifetime") is None:
            actor.detached = self._rt.default_actor_lifetime == "detached"     # JobConfig's default
        self._track_handles(actor_id)
        actor.namespace = namespace
        actor.is_async = is_async
        if actor.max_concurrency is None:
            actor.max_concurrency = 1000 if is_async else 1
        actor.resources = submission.task_resources(options, 0)
        self.actors[actor_id] = actor
        if name:
            self.named[(namespace, name)] = actor_id
        spec = TaskSpec()
        spec.task_id = b"create:" + actor_id
        spec.is_create = True
        spec.args_desc = args_desc
        spec.direct = direct
        spec.return_ids = []
        spec.actor_id = actor_id
        spec.caller = None
        spec.pg = self._node.pg_of(options)
        env = (options.get("runtime_env") or {}).get("env_vars")
        spec.env = dict(env) if env else None
        self._hold_args(spec)
        actor.create_spec = spec
        self._when_args_ready(spec, self._start)
        return None

    def _start(self, spec):
        actor = self.actors[spec.actor_id]
        if actor.state == "DEAD":
            return
        failed = self._failed_dependency(spec)
        if failed is not None:
            err = self._table.load(failed.desc)
            self.died(actor, exceptions.ActorDiedError(
                error_msg=f"The actor died because of an error raised in its creation task: {err}"))
            return
        node = self._node
        res = actor.resources
        if spec.pg:
            if not node.pg_fits(spec, res):
                self._pending_starts.append(spec)
                return
            node.pg_acquire(spec, res)
        elif not node.fits(res):
            if not node.feasible(res):
                warnings.warn(f"The actor {actor.class_name} requires {res}, which this node ({node.total}) "
                              "cannot satisfy; it will wait until resources are added.", stacklevel=2)
            self._pending_starts.append(spec)
            return
        else:
            node.acquire(res)
        actor.gpu_ids = node.take_gpus(res.get("GPU", 0))
        extra_env = {}
        if node.num_gpus:
            extra_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in actor.gpu_ids)
        if spec.env:
            extra_env.update(spec.env)
        host = None
        if self._colocation is not None:
            host = self._colocation.host_for(actor, extra_env)
        w = self._procs.spawn("actor", actor.class_name, extra_env, host=host)
        w.actor = actor
        actor.worker = w
        self._procs.ensure_defined(w, actor.code_id)
        arg_descs = self._ship_args(w, spec)
        self._send(w, wire.Create(actor.actor_id, actor.code_id, actor.class_name, spec.args_desc, arg_descs,
                       actor.max_concurrency, actor.is_async, dict(res), (actor.class_name, actor.methods, actor.name),
                       actor.trace_key, node.pg_info(spec)))

    def retry_pending_starts(self):
        pending = self._pending_starts
        n = len(pending)
        for _ in range(n):
            self._start(pending.popleft())

    def _on_created(self, w, results, ok):
        actor = w.actor
        if actor is None:
            return
        if ok:
            if actor.state != "DEAD":
                actor.state = "ALIVE"
                self._pump(actor)
                self._maybe_retire(actor)
            return
        err = serialization.loads_pack(results[0][1][1])
        self.died(actor, exceptions.ActorDiedError(
            error_msg="The actor died because of an error raised in its creation task, "
                      f"{err}"), kill=True)

    # ================================================================== calls
    def submit_call(self, caller, actor_id, method, args_desc, direct, return_ids, num_returns, task_name=None,
                    retries_left=None):
        """``retries_left``: what is left of the actor's ``max_task_retries`` for this call (None: all of it; a
        replayed call whose actor died is sent again with one spent)."""
        table = self._table
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
        if retries_left is None:
            retries_left = actor.max_task_retries if actor is not None else 0
        spec.retries_left = retries_left
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
            if actor.state == "ALIVE" and self._args_ready(spec):
                self._send_call(actor, spec)         # the head of an empty FIFO, ready: what _pump would do
                return
            q = actor.queues[key] = collections.deque()
        q.append(spec)
        if len(q) == 1:
            self._when_args_ready(spec, lambda s, actor=actor: self._pump(actor))

    def _args_ready(self, spec):
        if not spec.direct:
            return True
        objects = self._objects
        return all(objects[oid].state == READY for oid in spec.direct)

    def _pump(self, actor):
        """Send every call whose turn has come: the head of each caller's FIFO, once its args are ready."""
        if actor.state != "ALIVE":
            return
        for key, q in list(actor.queues.items()):
            while q:
                spec = q[0]
                if spec.unresolved:
                    break
                if not self._args_ready(spec):
                    spec.unresolved = 0
                    self._when_args_ready(spec, lambda s, actor=actor: self._pump(actor))
                    break
                q.popleft()
                self._send_call(actor, spec)
        for key in [k for k, q in actor.queues.items() if not q]:
            del actor.queues[key]

    def _send_call(self, actor, spec):
        """Send a call whose turn has come and whose arguments are ready (or complete it with an argument's
        error)."""
        failed = self._failed_dependency(spec) if spec.direct else None
        if failed is not None:
            self._complete_with_desc(spec, failed.desc)
            return
        w = actor.worker
        actor.in_flight[spec.task_id] = spec
        spec.worker = w
        self._send(w, wire.Call(spec.task_id, spec.method, spec.args_desc, self._ship_args(w, spec),
                                spec.return_ids, spec.num_returns, spec.name))

    def on_done(self, w, task_id, results, ok):
        """DONE from an actor's worker: its creation, or one of its calls."""
        if task_id.startswith(b"create:"):
            self._on_created(w, results, ok)
            return
        actor = w.actor
        spec = actor.in_flight.pop(task_id, None) if actor is not None else None
        if spec is not None and spec.cancelled:
            for _, desc in results:
                self._table.discard(desc)
            self._complete_with_error(spec, self._cancelled_call_error(actor, spec))
            if actor.out_of_scope:
                self._maybe_retire(actor)
            return
        if spec is None:
            for _, desc in results:
                self._table.discard(desc)
            return
        if not ok and spec.num_returns == submission.DYNAMIC and results and results[0][1][3]:
            results = self._streams.error_as_item(w, results[0][0], results[0][1])
        for oid, desc in results:
            self._table.fill(oid, desc)
        self._task_finished(spec)
        if w.actor is not None and w.actor.out_of_scope:
            self._maybe_retire(w.actor)

    @staticmethod
    def _cancelled_call_error(actor, spec):
        """What Ray 2.60 gives for a cancelled actor call: its coroutine's cancellation, for an async actor."""
        err = exceptions.TaskCancelledError(spec.task_id.hex())
        if not actor.is_async:
            return err
        return exceptions.RayTaskError(spec.name, f"{type(err).__name__}: {err}", err).as_instanceof_cause()

    # ================================================================== death and restart
    def died(self, actor, error, kill=False):
        if actor.state == "DEAD":
            return
        actor.state = "DEAD"
        actor.death_error = error
        w = actor.worker
        if w is not None:
            self._release_resources(actor)
            if kill and not w.dead and (w.pid or w.host is not None):
                self._end_worker(w, "It was killed.")
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

    def _release_resources(self, actor):
        spec = actor.create_spec
        if actor.resources and actor.worker is not None and not getattr(actor, "_released", False):
            actor._released = True
            node = self._node
            if spec is not None and spec.pg:
                node.pg_release(spec, actor.resources)
            else:
                node.release(actor.resources)
            node.give_gpus(actor.gpu_ids, actor.resources.get("GPU", 0))
            self.retry_pending_starts()
            self._tasks.schedule()

    def worker_died(self, w, reason):
        """An actor's process ended (``w`` is marked dead): the actor restarts, or dies."""
        actor = w.actor
        self._table.owner_died(w.index)
        if actor is None or actor.state == "DEAD":
            return
        exiting = getattr(w, "exiting", False)
        if not exiting and not actor.no_restart and (actor.restarts_left != 0):
            self._restart(actor, w, reason)
        else:
            msg = (f"The actor {actor.class_name} (id={actor.actor_id.hex()}) died. {reason}" if not exiting else
                   f"The actor {actor.class_name} is dead because its worker process exited by a user "
                   "request: exit_actor() is called (or __ray_terminate__).")
            if actor.no_restart and getattr(actor, "killed", False):
                msg = f"The actor {actor.class_name} was killed by ray.kill(). {reason}"
            self.died(actor, exceptions.ActorDiedError(error_msg=msg))

    def owner_died(self, w):
        """Worker ``w`` ended: the non-detached actors it created share its fate, as in Ray (they end, with no
        restart)."""
        for actor in list(self.actors.values()):
            if actor.owner == w.index and not actor.detached and actor.state != "DEAD":
                actor.no_restart = True
                self.died(actor, exceptions.ActorDiedError(
                    error_msg=f"The actor {actor.class_name} (id={actor.actor_id.hex()}) died because its owner "
                              f"has died: the worker process (pid={w.pid}) that created it ended."), kill=True)

    def _restart(self, actor, w, reason):
        if actor.restarts_left > 0:
            actor.restarts_left -= 1
        actor.num_restarts += 1
        actor.state = "RESTARTING"
        # As in Ray: a call in flight when a restartable actor dies may or may not have run.
        err = exceptions.ActorUnavailableError(
            actor_id=actor.actor_id.hex(),
            error_msg=f"The actor {actor.actor_id.hex()} is unavailable: The actor is temporarily unavailable: "
                      f"{actor.class_name} died while running this call and is being restarted ({reason}). "
                      "The task may or may not have been executed on the actor.")
        # Newest first: each goes to the front of its caller's queue, so they are re-sent in their own order.
        for spec in reversed(list(actor.in_flight.values())):
            if spec.retries_left != 0:
                if spec.retries_left > 0:
                    spec.retries_left -= 1
                key = spec.caller.index if spec.caller is not None else -1
                actor.queues.setdefault(key, collections.deque()).appendleft(spec)
            else:
                self._complete_with_error(spec, err)
        actor.in_flight.clear()
        self._release_resources(actor)
        actor._released = False
        actor.worker = None
        self._start(actor.create_spec)

    # ================================================================== kill / cancel / placement group removed
    def kill(self, actor_id, no_restart):
        actor = self.actors.get(actor_id)
        if actor is None or actor.state == "DEAD":
            return
        if no_restart:
            actor.no_restart = True
            actor.killed = True
            # Dead from now on, as in Ray: later calls fail at once, even before the process is gone.
            self.died(actor, exceptions.ActorDiedError(
                error_msg=f"The actor {actor.class_name} (id={actor.actor_id.hex()}) was killed by ray.kill()."),
                kill=True)
            return
        w = actor.worker
        if w is not None and not w.dead and (w.pid or w.host is not None):
            self._end_worker(w, "It was killed by ray.kill().")

    def _end_worker(self, w, reason):
        if self._procs.end_worker(w):
            self._rt.on_worker_died(w, reason)      # a guest: dead now, whatever its thread still runs

    def cancel(self, object_id, force):
        """Cancel the actor call returning ``object_id``: True if one was found."""
        found = self._call_returning(object_id)
        if found is None:
            return False
        actor, spec, queue = found
        if force:
            raise ValueError("force=True is not supported for actor tasks.")
        if queue is not None:
            queue.remove(spec)
            self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
            return True
        # As in Ray: an actor call already with its actor is not interrupted (actors have state), but
        # sees is_canceled(), an async one has its coroutine cancelled, and its result becomes
        # TaskCancelledError (see on_done).
        spec.cancelled = True
        if actor.worker is not None and not actor.worker.dead:
            self._send(actor.worker, wire.Cancel(spec.task_id))
            self._procs.flush_outboxes()
        return True

    def _call_returning(self, object_id):
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

    def evict_group(self, pg_id):
        """A removed placement group takes its actors with it, as in Ray."""
        for actor in list(self.actors.values()):
            spec = actor.create_spec
            if actor.state != "DEAD" and spec is not None and spec.pg and spec.pg[0] == pg_id:
                actor.no_restart = True
                self.died(actor, exceptions.ActorDiedError(
                    error_msg=f"The actor {actor.class_name} died because its placement group was removed."),
                    kill=True)

    # ================================================================== named actors
    def info(self, name, namespace):
        """(id, class name, methods) of the live actor named ``name`` in ``namespace``, or None."""
        actor_id = self.named.get((namespace, name))
        if actor_id is None or self.actors[actor_id].state == "DEAD":
            return None
        a = self.actors[actor_id]
        return (a.actor_id, a.class_name, a.methods)

    def named_list(self, all_namespaces, namespace):
        """Live named actors: names in ``namespace``, or {"name", "namespace"} dicts of every namespace."""
        out = []
        for (ns, name), aid in self.named.items():
            if self.actors[aid].state == "DEAD":
                continue
            if all_namespaces:
                out.append({"name": name, "namespace": ns})
            elif ns == namespace:
                out.append(name)
        return out

    # ================================================================== actor lifetime (handles)
    # Handles count like refs (core.handles): the entry under the actor's handle key lives while any process
    # holds a handle or a value in flight nests one.  When it goes, an unnamed, non-detached actor finishes
    # its queued calls and exits, as in Ray.
    def _track_handles(self, actor_id):
        self._table.add_ready(handles.key_of(actor_id), (INLINE, b"", [], False))

    def handles_gone(self, actor_id):
        # Named actors too: Ray 2.x collects them like any other; only detached ones live on.
        actor = self.actors.get(actor_id)
        if actor is None or actor.state == "DEAD" or actor.detached:
            return
        actor.out_of_scope = True
        self._maybe_retire(actor)

    def _maybe_retire(self, actor):
        if not actor.out_of_scope or actor.state == "DEAD":
            return
        if actor.in_flight or any(actor.queues.values()):
            return
        if handles.key_of(actor.actor_id) in self._objects:
            # A counted handle reappeared (a lost copy was held again): wait until it goes too.
            actor.out_of_scope = False
            return
        error = exceptions.ActorDiedError(
            error_msg=f"The actor {actor.class_name} is dead because all references to it went out of scope.")
        if actor.state != "ALIVE":
            # Not started yet (or restarting): as Ray cancels its creation, stop it wherever it is.
            self.died(actor, error, kill=True)
            return
        w = actor.worker
        self.died(actor, error)
        if w is not None and not w.dead:
            w.exiting = True
            self._send(w, wire.Exit(True))     # a graceful end: __ray_shutdown__, atexit
