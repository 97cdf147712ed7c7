"""The runtime protocol: every operation the facade asks of the runtime serving this process.

``rayreact.core.context.current`` holds one object implementing :class:`RuntimeAPI`:

* the driver ``Runtime`` (core.runtime), when ``init()`` started rayreact here;
* the ``Worker`` (core.worker) inside a worker process, which forwards nested calls to the driver;
* ``LocalRuntime`` (core.local_mode), for ``init(local_mode=True)``;
* ``RayDelegate`` (compat.delegate), when ``init(address=...)`` connected to a real Ray cluster.

The facade (``rayreact._api``, ``actor``, ``remote_function``, ``object_ref``, ``runtime_context``,
``util``) checks its arguments and then makes one call of this protocol; it never asks which
runtime it talks to.  An operation that does not apply to a runtime is still implemented by it,
explicitly: it raises a clear error or is a documented no-op.

Ids.  An *object id* is the 28-byte id a rayreact ``ObjectRef`` carries (``ref._id``), an *actor
id* the 16 bytes an ``ActorHandle`` carries (``handle._actor_id``).  Real Ray's refs and handles
have no such ids: for the delegate they serve as their own ids, and :meth:`RuntimeAPI.external_id`
is how the facade recognises them.

A layer may stand in front of a runtime by composition (:class:`RuntimeFront`): with replay on,
``context.current`` is the reactor (core.replay), which holds the driver ``Runtime``, serves
``submit_task``, ``submit_actor_call``, ``put``, ``get_values``, ``wait_ids``, ``create_actor``,
``kill_actor``, ``cancel``, ``timeline_events`` and ``shutdown`` itself, and passes the rest on.

What core reads of the facade's objects is declared here too (:class:`RemoteFunctionInterface`,
:class:`ActorClassInterface`): core reaches them through those names only.

This module imports nothing of rayreact: core may use it, the facade may use it.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

OBJECT = "object"   # external_id kinds
ACTOR = "actor"


class RuntimeInfo:
    """Facts about this process at the moment of asking (what ``get_runtime_context()`` reports).

    ``placement_group``: ``(placement group hex id, capture child tasks)`` of the running task or
    actor, or None.  Ids are bytes (or None where there is none).
    """

    __slots__ = ("job_id", "node_id", "namespace", "task_id", "actor_id", "actor_name", "num_restarts",
                 "placement_group", "assigned_resources", "is_actor")

    def __init__(self, *, job_id: bytes, node_id: bytes, namespace: Optional[str], task_id: Optional[bytes] = None,
                 actor_id: Optional[bytes] = None, actor_name: Optional[str] = None, num_restarts: int = 0,
                 placement_group: Optional[Tuple[str, bool]] = None,
                 assigned_resources: Optional[Dict[str, float]] = None, is_actor: bool = False):
        self.job_id = job_id
        self.node_id = node_id
        self.namespace = namespace
        self.task_id = task_id
        self.actor_id = actor_id
        self.actor_name = actor_name
        self.num_restarts = num_restarts
        self.placement_group = placement_group
        self.assigned_resources = dict(assigned_resources or {})
        self.is_actor = is_actor

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"RuntimeInfo({fields})"


@runtime_checkable
class RemoteFunctionInterface(Protocol):
    """What core reads of the ``RemoteFunction`` the facade hands to ``submit_task``.

    The names are those of Ray's own ``RemoteFunction`` (hence the underscore: a user's object looks as in
    Ray).  Core reads these and nothing else of it; it caches the pickled code's id and bytes in
    ``_code_id``/``_code_pickle`` (core.submission) and the reactor its call-site key in ``_replay_key``.
    """

    _function: Callable             # the user's function
    _function_name: str             # "module.qualname": task names, process titles, errors
    _default_num_returns: Any       # 1, or "streaming" for a generator function
    _code_id: Optional[bytes]
    _code_pickle: Optional[bytes]


@runtime_checkable
class ActorClassInterface(Protocol):
    """What core reads of the ``ActorClass`` the facade hands to ``create_actor`` (Ray's names, as above)."""

    _cls: type                      # the user's class
    _methods: dict                  # method name -> its options (num_returns, arity), as handles carry them
    _is_async: bool                 # some method is a coroutine function: an asyncio actor
    _code_id: Optional[bytes]
    _code_pickle: Optional[bytes]


@runtime_checkable
class RuntimeAPI(Protocol):
    """What the facade calls on ``context.current``.  See the module docstring for ids."""

    #: True in the process that owns the session (a driver, local mode, a real-Ray driver); False in a
    #: worker process (rayreact's, or a real Ray worker that adopted Ray's connection).
    is_driver: bool

    #: True where a child forked from this process may go on using this runtime (local mode, real
    #: Ray's own rules); False where the runtime talks to worker processes over shared rings, which a
    #: forked child must never touch (core.context forgets it in the child).
    survives_fork: bool

    # ------------------------------------------------------------------ calls
    def submit_task(self, remote_function, args, kwargs, options):
        """Submit one call of ``remote_function`` (a RemoteFunction) with ``options`` (its merged task
        options).  Returns at once: an ObjectRef, a list of them (``num_returns`` > 1), or an
        ObjectRefGenerator (streaming); for the delegate, Ray's equivalents."""

    def create_actor(self, actor_class, args, kwargs, options):
        """Start an actor of ``actor_class`` (an ActorClass) with ``options``; returns its handle at once
        (a weak handle to an existing actor for ``get_if_exists``).  Raises ValueError for a taken name."""

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        """Submit ``handle``'s method described by ``info`` (actor.MethodInfo); returns like submit_task."""

    # ------------------------------------------------------------------ objects
    def put(self, value):
        """Store a snapshot of ``value``; returns its ObjectRef.  TypeError for a ref or an unpicklable value."""

    def get_values(self, object_ids: Sequence, timeout: Optional[float]) -> List:
        """The values of ``object_ids``, in order, waiting up to ``timeout`` seconds (None: for ever).
        Raises the stored error of the first failed one (a RayTaskError...), GetTimeoutError on timeout."""

    def wait_ids(self, object_ids: Sequence, num_returns: int, timeout: Optional[float],
                 fetch_local: bool) -> List[bool]:
        """Wait until ``num_returns`` of ``object_ids`` are ready or ``timeout`` passes; returns one
        readiness flag per id, in order (the facade splits the refs)."""

    def external_id(self, obj, kind: str):
        """The id this runtime knows ``obj`` by, when ``obj`` is an object ref (``kind`` "object") or an
        actor handle ("actor") of its own that is not rayreact's; None otherwise.  Only the real-Ray
        delegate has such objects (Ray's ObjectRef / ObjectRefGenerator and ActorHandle, which are
        their own ids); rayreact's runtimes return None."""

    def on_ref_unpickled(self, object_id: bytes) -> None:
        """A rayreact ObjectRef was unpickled in this process (a runtime that counts borrowers may)."""

    # ------------------------------------------------------------------ generator tasks
    def stream_next(self, stream_id: bytes, index: int, timeout: Optional[float], peek: bool = False):
        """Item ``index`` of a streaming call: ``("item", ObjectRef)`` (with ``peek``: ``("item", id)``
        without taking it), ``("error", None)``, ``("end", None)`` or, with ``peek``, ``("pending", None)``.
        GetTimeoutError if none comes within ``timeout``."""

    def stream_drop(self, stream_id: bytes, index: int) -> None:
        """The consumer dropped the generator before item ``index``: free what it has not taken."""

    # ------------------------------------------------------------------ actors, cancellation
    def kill_actor(self, actor_id, no_restart: bool) -> None:
        """Kill the actor at once (``ray.kill``); with ``no_restart`` it is dead for good."""

    def cancel(self, object_id, force: bool, recursive: bool) -> None:
        """Cancel the call that returns ``object_id`` (``ray.cancel``); its get raises TaskCancelledError."""

    def named_actor(self, name: str, namespace: Optional[str], make_handle: Callable):
        """The live actor called ``name`` in ``namespace`` (None: this process' namespace), or None.
        rayreact's runtimes return ``make_handle(actor_id, class_name, methods)`` (the facade's weak
        handle); the delegate returns Ray's handle."""

    def list_named_actors(self, all_namespaces: bool) -> List:
        """Names of live named actors of this namespace, or ``{"name", "namespace"}`` dicts of all."""

    # ------------------------------------------------------------------ resources
    def resources(self, which: str) -> Dict[str, float]:
        """``which`` "total": ``cluster_resources()``; "available": ``available_resources()``."""

    def nodes(self) -> List[Dict[str, Any]]:
        """``ray.nodes()``: one dict per node, in Ray's format."""

    def placement_group_call(self, verb: str, payload):
        """One request of rayreact.util.placement_group to the session's ResourceLedger (verbs and
        payloads: util._pg_accounting).  The delegate raises NotImplementedError."""

    def get_gpu_ids(self) -> List:
        """The GPU ids assigned to this process (a driver's: those CUDA_VISIBLE_DEVICES names)."""

    # ------------------------------------------------------------------ this process
    def runtime_info(self) -> RuntimeInfo:
        """Facts about this process now: job, node, namespace, running task or actor, resources."""

    def runtime_context(self, make_context: Callable):
        """What ``get_runtime_context()`` returns: rayreact's runtimes ``make_context(self)`` (the facade's
        RuntimeContext, which asks ``runtime_info``); the delegate Ray's own RuntimeContext."""

    def current_actor_handle(self):
        """A weak handle to the actor running this call.  RuntimeError outside an actor."""

    def current_call_cancelled(self) -> bool:
        """Whether ray.cancel named the call running now.  RuntimeError in a driver."""

    def request_actor_exit(self) -> bool:
        """``exit_actor()``: mark the actor running this call to end once the call returns; returns True
        when it runs on an asyncio loop (its caller then raises AsyncioActorExit, otherwise SystemExit).
        TypeError outside an actor.  (The delegate has Ray end the actor: Ray raises.)"""

    # ------------------------------------------------------------------ session
    def timeline_events(self) -> List[Dict[str, Any]]:
        """Chrome-trace events of executed calls (``ray.timeline()``); [] where none are kept."""

    def address_info(self) -> Dict[str, Any]:
        """What ``init()`` returns (``address_info``): addresses, node id, versions."""

    def finish_submitted(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every task and actor call submitted so far (and what they
        submit in turn) to finish, as a driver's clean exit does before ``shutdown``; the number still
        unfinished.  Runtimes with nothing in flight at exit (a worker, local mode) return 0 at once; the
        delegate leaves it to Ray (0)."""

    def shutdown(self) -> None:
        """End the session: stop its workers, free its memory.  Where this process does not own the
        session (``is_driver`` False: a worker, an adopted real-Ray connection) a documented no-op."""


PROTOCOL_METHODS = tuple(name for name, member in vars(RuntimeAPI).items()
                         if callable(member) and not name.startswith("_"))
PROTOCOL_ATTRIBUTES = ("is_driver", "survives_fork")


def visible_gpu_ids() -> List:
    """CUDA_VISIBLE_DEVICES as Ray reports it: ints where they are numbers, names otherwise."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return []
    return [int(x) if x.isdigit() else x for x in visible.split(",") if x]


def node_ip_address() -> str:
    """This machine's address as Ray reports it (RAY_NODE_IP_ADDRESS wins; no route: loopback)."""
    override = os.environ.get("RAY_NODE_IP_ADDRESS")
    if override:
        return override
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("8.8.8.8", 53))  # a UDP connect sends nothing: it only picks the route
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class RuntimeBase:
    """What rayreact's own runtimes (driver, worker, local mode) share of the protocol.

    Each of them implements the rest itself; this base holds only the parts that are the same for
    all three, built on their other protocol methods and on ``shm_dir`` (their shared-memory
    directory, "" for local mode).
    """

    survives_fork = False

    def on_ref_unpickled(self, object_id):
        """Nothing to count by default (the driver counts borrowers through core.refcount)."""

    def external_id(self, obj, kind):
        return None            # rayreact's runtimes know only rayreact's refs and handles

    def named_actor(self, name, namespace, make_handle):
        info = self.get_actor_info(name, namespace)
        return None if info is None else make_handle(*info)

    def runtime_context(self, make_context):
        return make_context(self)

    def get_gpu_ids(self):
        return visible_gpu_ids()

    def nodes(self):
        return [{
            "NodeID": self.runtime_info().node_id.hex(), "Alive": True, "NodeManagerAddress": node_ip_address(),
            "NodeManagerHostname": os.uname().nodename, "NodeManagerPort": 0, "ObjectManagerPort": 0,
            "ObjectStoreSocketName": "", "RayletSocketName": "", "MetricsExportPort": 0, "NodeName": "127.0.0.1",
            "alive": True, "Resources": self.resources("total"), "Labels": {}, "RuntimeEnvAgentPort": 0,
            "DeathReason": 0, "DeathReasonMessage": "",
        }]

    def address_info(self):
        return {
            "node_ip_address": "127.0.0.1",
            "raylet_ip_address": "127.0.0.1",
            "redis_address": None,
            "object_store_address": self.shm_dir,
            "raylet_socket_name": "",
            "webui_url": "",
            "session_dir": self.shm_dir,
            "metrics_export_port": None,
            "gcs_address": "rayreact://local",
            "address": "rayreact://local",
            "node_id": self.runtime_info().node_id.hex(),
            "python_version": platform.python_version(),
            "ray_version": "2.60.0",
        }


class DriverRuntimeBase(RuntimeBase):
    """What the two runtimes of a driver process (the dynamic ``Runtime`` and ``LocalRuntime``) answer
    alike: the calls that only make sense inside a worker's task or actor."""

    def current_actor_handle(self):
        raise RuntimeError("This method is only available in an actor.")

    def current_call_cancelled(self):
        raise RuntimeError("This method is only available when the process is a worker.")

    def request_actor_exit(self):
        raise TypeError("exit_actor API is called on a non-actor worker.")

    def timeline_events(self):
        """[]: neither keeps a timeline (the reactor in front of a Runtime, when on, answers instead)."""
        return []


class RuntimeFront:
    """A layer in front of a runtime (``behind``) that implements the protocol by passing each call on;
    a subclass overrides what it serves itself (the reactor: calls, objects, shutdown)."""

    is_driver = True
    survives_fork = False         # it fronts a runtime of worker processes (the reactor fronts the driver's)

    def __init__(self, behind):
        self.behind = behind

    def submit_task(self, remote_function, args, kwargs, options):
        return self.behind.submit_task(remote_function, args, kwargs, options)

    def create_actor(self, actor_class, args, kwargs, options):
        return self.behind.create_actor(actor_class, args, kwargs, options)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        return self.behind.submit_actor_call(handle, info, args, kwargs, num_returns)

    def put(self, value):
        return self.behind.put(value)

    def get_values(self, object_ids, timeout):
        return self.behind.get_values(object_ids, timeout)

    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        return self.behind.wait_ids(object_ids, num_returns, timeout, fetch_local)

    def external_id(self, obj, kind):
        return self.behind.external_id(obj, kind)

    def on_ref_unpickled(self, object_id):
        self.behind.on_ref_unpickled(object_id)

    def stream_next(self, stream_id, index, timeout, peek=False):
        return self.behind.stream_next(stream_id, index, timeout, peek)

    def stream_drop(self, stream_id, index):
        self.behind.stream_drop(stream_id, index)

    def kill_actor(self, actor_id, no_restart):
        return self.behind.kill_actor(actor_id, no_restart)

    def cancel(self, object_id, force, recursive):
        return self.behind.cancel(object_id, force, recursive)

    def named_actor(self, name, namespace, make_handle):
        return self.behind.named_actor(name, namespace, make_handle)

    def list_named_actors(self, all_namespaces):
        return self.behind.list_named_actors(all_namespaces)

    def resources(self, which):
        return self.behind.resources(which)

    def nodes(self):
        return self.behind.nodes()

    def placement_group_call(self, verb, payload):
        return self.behind.placement_group_call(verb, payload)

    def get_gpu_ids(self):
        return self.behind.get_gpu_ids()

    def runtime_info(self):
        return self.behind.runtime_info()

    def runtime_context(self, make_context):
        return self.behind.runtime_context(make_context)

    def current_actor_handle(self):
        return self.behind.current_actor_handle()

    def current_call_cancelled(self):
        return self.behind.current_call_cancelled()

    def request_actor_exit(self):
        return self.behind.request_actor_exit()

    def timeline_events(self):
        return self.behind.timeline_events()

    def address_info(self):
        return self.behind.address_info()

    def finish_submitted(self, timeout):
        return self.behind.finish_submitted(timeout)

    def shutdown(self):
        return self.behind.shutdown()
