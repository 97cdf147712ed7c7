"""``init(local_mode=True)``: everything runs in the driver, one call at a time, debugger-friendly.

Semantics stay those of the real runtime: arguments and ``put`` values are
snapshots (serialized and read back, numpy arrays read-only), errors become
``RayTaskError`` at ``get``, refs passed directly are resolved and nested refs
are not.  A call runs at submission; its result (or error) waits in a dict.
"""

from __future__ import annotations

import asyncio
import os

from .. import exceptions
from .refs import ObjectRef
from .runtime_api import DriverRuntimeBase
from . import executor, handles, ids, serialization, submission


class _Actor:
    def __init__(self, class_name, methods):
        self.class_name = class_name
        self.methods = methods
        self.loop = None      # async actors keep one event loop, so their asyncio objects stay usable
        self.instance = None
        self.dead_error = None

    def run_coroutine(self, coro):
        if self.loop is None:
            import threading
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, daemon=True, name="rayreact-local-asyncio").start()
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class LocalRuntime(DriverRuntimeBase):
    is_driver = True
    survives_fork = True         # everything is in this process: a forked child has its own copy
    local_mode = True
    is_actor = False

    def __init__(self, namespace=None, runtime_env=None, num_cpus=None, num_gpus=None, resources=None):
        self.namespace = namespace or f"anon-{os.urandom(4).hex()}"
        self.job_id = b"\x01\x00\x00\x00"
        self.node_id = os.urandom(28)
        self.env = dict((runtime_env or {}).get("env_vars") or {})
        os.environ.update(self.env)
        self.total = {"CPU": float(os.cpu_count() if num_cpus is None else num_cpus)}
        if num_gpus:
            self.total["GPU"] = float(num_gpus)
        self.total.update({k: float(v) for k, v in (resources or {}).items()})
        self.values = {}       # object id -> (pack bytes, is_error)
        self.actors = {}
        self.named = {}
        self.current_task_id = None
        self.actor_id = None
        self._calling = None     # the _Actor whose method runs now (its event loop runs its coroutines)
        self.shm_dir = ""

    # ---------------------------------------------------------------- objects
    def store(self, oid, value, is_error=False):
        return (serialization.serialize(value, is_error=is_error).pack(), is_error)

    def _store(self, oid, value, is_error=False):
        self.values[oid] = self.store(oid, value, is_error)

    def put(self, value):
        if isinstance(value, ObjectRef):
            raise TypeError("Calling 'put' on an ray.ObjectRef is not allowed.")
        oid = ids.new_id()
        try:
            self._store(oid, value)
        except serialization.SerializationError as exc:
            raise TypeError(str(exc)) from exc.__cause__
        return ObjectRef(oid)

    def _load(self, oid):
        pack, is_error = self.values[oid]
        return serialization.loads_pack(pack), is_error

    def get_values(self, object_ids, timeout):
        out = []
        for oid in object_ids:
            if oid not in self.values:
                raise exceptions.ReferenceCountingAssertionError(oid.hex())
            value, is_error = self._load(oid)
            if is_error:
                raise submission.raisable(value)
            out.append(value)
        return out

    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        return [oid in self.values for oid in object_ids]

    # ---------------------------------------------------------------- calls (the executor's host hooks)
    interrupt_cancels = False
    user_errors_only = True      # Ctrl-C and sys.exit in a call belong to the driver: they run in it

    def resolve(self, args, kwargs):
        def one(a):
            if type(a) is ObjectRef:
                value, is_error = self._load(a._id)
                if is_error:
                    raise executor.DependencyFailed(value)
                return value
            return a
        args = tuple(one(a) for a in args)
        kwargs = {k: one(v) for k, v in kwargs.items()}
        # Round-trip through pickle: the callee gets copies, as with a real worker.
        try:
            ser = serialization.serialize((args, kwargs))
        except serialization.SerializationError as exc:
            raise executor.Unsubmittable(TypeError(str(exc))) from None   # .remote() raises it, as in Ray
        return serialization.loads_pack(ser.pack())

    def run_async(self, awaitable):
        actor = self._calling
        return actor.run_coroutine(awaitable) if actor is not None else asyncio.run(awaitable)

    def stream_item(self, stream_id, index, value, keep):
        oid = submission.item_id(stream_id, index)
        self._store(oid, value)
        return oid

    def _run(self, name, fn, args, kwargs, return_ids, num_returns, actor=None):
        prev = self.current_task_id, self._calling
        self.current_task_id = ids.task_id()
        self._calling = actor
        try:
            results, status = executor.run(self, name, fn, args, kwargs, return_ids, num_returns,
                                           actor.instance if actor is not None else None)
        finally:
            self.current_task_id, self._calling = prev
        if status == executor.RAISED and num_returns == submission.DYNAMIC:
            results = self._dynamic_error_as_item(return_ids[0], results[0][1])
        self.values.update(results)

    def _dynamic_error_as_item(self, stream_id, error):
        """A dynamic generator keeps what it yielded; its error is one more item (as in Ray)."""
        from .refs import DynamicObjectRefGenerator
        count = 0
        while submission.item_id(stream_id, count) in self.values:
            count += 1
        self.values[submission.item_id(stream_id, count)] = error
        items = [ObjectRef(submission.item_id(stream_id, i)) for i in range(count + 1)]
        return [(stream_id, self.store(stream_id, DynamicObjectRefGenerator(items)))]

    def stream_next(self, stream_id, index, timeout, peek=False):
        item = submission.item_id(stream_id, index)
        if item in self.values:
            return ("item", item if peek else ObjectRef(item))
        pack, is_error = self.values.get(stream_id, (None, False))
        return ("error", None) if is_error else ("end", None)

    def stream_drop(self, stream_id, index):
        pass

    def submit_task(self, remote_function, args, kwargs, options):
        num_returns = submission.num_returns_of(options, remote_function._default_num_returns)
        return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        self._run(remote_function._function_name, remote_function._function, args, kwargs, return_ids, num_returns)
        return submission.as_returns(refs, num_returns)

    def create_actor(self, actor_class, args, kwargs, options):
        name = options.get("name")
        namespace = options.get("namespace") or self.namespace
        if name and (namespace, name) in self.named:
            if options.get("get_if_exists"):
                aid = self.named[(namespace, name)]
                return handles.new_handle(aid, self.actors[aid].class_name, self.actors[aid].methods)
            raise ValueError(f"The name {name} (namespace={namespace}) is already taken.")
        aid = ids.actor_id()
        actor = _Actor(actor_class._cls.__name__, actor_class._methods)
        self.actors[aid] = actor
        if name:
            self.named[(namespace, name)] = aid
        probe = ids.new_id()
        cls = actor_class._cls

        def construct(*a, **k):
            inst = cls.__new__(cls)
            inst.__init__(*a, **k)
            actor.instance = inst

        self._run(f"{cls.__name__}.__init__", construct, args, kwargs, [probe], 1)
        value, is_error = self._load(probe)
        del self.values[probe]
        if is_error:
            actor.dead_error = exceptions.ActorDiedError(
                error_msg=f"The actor died because of an error raised in its creation task, {value}")
        return handles.new_handle(aid, actor.class_name, actor.methods, original=True)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        num_returns = submission.normalize_num_returns(num_returns)
        actor = self.actors.get(handle._actor_id)
        return_ids = [ids.new_id() for _ in range(submission.return_count(num_returns))]
        refs = [ObjectRef(oid) for oid in return_ids]
        if actor is None or actor.dead_error is not None:
            err = actor.dead_error if actor else exceptions.ActorDiedError(error_msg="Unknown actor.")
            for oid in return_ids:
                self._store(oid, err, True)
            return submission.as_returns(refs, num_returns)
        if info.name == "__ray_ready__":
            method = lambda: True  # noqa: E731
        elif info.name == "__ray_call__":
            instance = actor.instance
            method = lambda fn, *a, **k: fn(instance, *a, **k)  # noqa: E731
        elif info.name == "__ray_terminate__":
            def method():
                actor.dead_error = exceptions.ActorDiedError(error_msg="The actor exited.")
        else:
            method = getattr(actor.instance, info.name)
        prev = self.actor_id
        self.actor_id = handle._actor_id
        try:
            self._run(f"{actor.class_name}.{info.name}", method, args, kwargs, return_ids, num_returns, actor)
        finally:
            self.actor_id = prev
        return submission.as_returns(refs, num_returns)

    def kill_actor(self, actor_id, no_restart=True):
        actor = self.actors.get(actor_id)
        if actor is not None:
            actor.dead_error = exceptions.ActorDiedError(error_msg="The actor was killed by ray.kill().")

    def cancel(self, object_id, force=False, recursive=True):
        pass

    def get_actor_info(self, name, namespace=None):
        aid = self.named.get((namespace or self.namespace, name))
        if aid is None or self.actors[aid].dead_error is not None:
            return None
        return (aid, self.actors[aid].class_name, self.actors[aid].methods)

    def list_named_actors(self, all_namespaces=False):
        return [({"name": n, "namespace": ns} if all_namespaces else n) for (ns, n) in self.named
                if all_namespaces or ns == self.namespace]

    def resources(self, which):
        return dict(self.total)

    def placement_group_call(self, verb, payload):
        if not hasattr(self, "_ledger"):
            from .pg_accounting import ResourceLedger
            self._ledger = ResourceLedger(self)
        return self._ledger.handle(verb, payload)

    @property
    def available(self):
        if not hasattr(self, "_available"):
            self._available = dict(self.total)
        return self._available

    def finish_submitted(self, timeout):
        return 0          # every call ran to completion when it was made

    def shutdown(self):
        self.values.clear()
        self.actors.clear()

    # ---------------------------------------------------------------- runtime protocol (core.runtime_api)
    # The rest of RuntimeAPI: the methods above, and what core.runtime_api.RuntimeBase shares.
    actor_name = None

    def runtime_info(self):
        from .runtime_api import RuntimeInfo
        # As before: inside an actor's call the actor id is set, yet is_actor stays False (everything runs in
        # the driver, so there is no actor process to hand a handle to).
        return RuntimeInfo(job_id=self.job_id, node_id=self.node_id, namespace=self.namespace,
                           task_id=self.current_task_id, actor_id=self.actor_id)
