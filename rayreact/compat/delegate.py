"""Multi-node through real Ray: every API call carried out by a real Ray cluster.

When ``init(address="auto" | "ray://..." | "host:port")`` (or ``RAY_ADDRESS``) names
a cluster, rayreact does not grow one of its own: ``init`` calls :func:`connect`,
which returns a :class:`RayDelegate`, and ``context.current`` holds it.  From then
on the facade's runtime-protocol calls (core.runtime_api.RuntimeAPI) are carried
out by real Ray.  Objects are Ray's own: ``.remote()`` returns real
``ray.ObjectRef``\\ s and real actor handles, so Ray serializes, resolves and
reference-counts them exactly as it always does, nested refs and handles passed
between tasks included.

Wiring:

* ``init``: ``if address is not None or delegate.in_ray_worker():``
  ``context.current = delegate.connect(address, **init_kwargs)``.  Inside a Ray
  worker (user code that calls rayreact's API from a task running on the
  cluster) :func:`connect` adopts the worker's existing Ray connection.
* The facade calls the protocol as on any runtime.  Ray's refs and handles are
  their own ids: :meth:`RayDelegate.external_id` recognises them, so ``get``,
  ``wait``, ``kill`` and ``cancel`` hand them over unchanged.
* ``RemoteFunction.remote`` / ``ActorClass.remote`` reach
  :meth:`RayDelegate.submit_task` / :meth:`RayDelegate.create_actor`, which build
  the real ``ray.remote`` twin of the rayreact object lazily with :func:`to_ray`,
  so objects decorated before ``init`` (or unpickled in a worker) work.

Errors that real Ray raises out of ``get``/``wait`` (and ``kill``, ``cancel``) are
re-raised as instances of *both* Ray's class and rayreact's class of the same name
(a ``RayTaskError`` also stays an instance of the user's exception class), so
``except`` clauses written against either module catch them.

A script started by ``rayreact run`` has ``ray`` aliased to rayreact; real Ray
needs its own name, so :func:`connect` removes the alias (code already holding
rayreact keeps it; later ``import ray.X`` gets real Ray, which then does the work
anyway).
"""

from __future__ import annotations

import functools
import importlib
import os
import platform
import sys
import threading

from ..core import trace

_lock = threading.RLock()
_connection = None  # the RayDelegate of this process, while connected
_dual_exception_classes: dict = {}


# ---------------------------------------------------------------- real Ray

def _real_ray():
    """The real ``ray`` package (un-aliasing ``ray`` first if ``rayreact run`` aliased it)."""
    module = sys.modules.get("ray")
    if module is not None and getattr(module, "__name__", "") == "ray":
        return module
    from rayreact.compat import alias

    if alias.installed() or module is not None:
        alias.uninstall()
        sys.modules.pop("ray", None)
    return importlib.import_module("ray")


def in_ray_worker() -> bool:
    """Whether this process is a worker of a running real Ray (cheap when it is not)."""
    module = sys.modules.get("ray")
    if module is None or getattr(module, "__name__", "") != "ray":
        return False
    try:
        return bool(module.is_initialized()) and module._private.worker.global_worker.mode == module.WORKER_MODE
    except Exception:  # a half-imported or foreign module called "ray"
        return False


def connected() -> bool:
    return _connection is not None


# ---------------------------------------------------------------- the runtime protocol, by real Ray

def _translating_errors(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            dual = _dual_exception(exc)
            if dual is exc:
                raise
            raise dual.with_traceback(exc.__traceback__) from exc.__cause__
    return call


class RayDelegate:
    """``context.current`` while connected: core.runtime_api.RuntimeAPI, carried out by real Ray.

    Object ids and actor ids are Ray's ``ObjectRef``\\ s and ``ActorHandle``\\ s themselves (see
    :meth:`external_id`).  ``is_driver`` is False inside a Ray worker, whose connection is adopted
    and not ours to close.
    """

    is_driver = True
    survives_fork = True       # what a forked child may do is real Ray's business

    def __init__(self, ray, adopted):
        self.ray = ray
        self.adopted = adopted  # True inside a Ray worker: the connection is not ours to close
        ctx = ray.get_runtime_context()
        self.namespace = ctx.namespace
        self.node_id = bytes.fromhex(ctx.get_node_id())
        self.job_id = bytes.fromhex(ctx.get_job_id())
        self.is_driver = not adopted

    # ------------------------------------------------------------------ calls
    def submit_task(self, remote_function, args, kwargs, options):
        return _with_options(to_ray(remote_function), options, remote_function).remote(*args, **kwargs)

    def create_actor(self, actor_class, args, kwargs, options):
        return _with_options(to_ray(actor_class), options, actor_class).remote(*args, **kwargs)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        method = getattr(handle, info.name)
        if num_returns is not None and num_returns != info.num_returns:
            method = method.options(num_returns=num_returns)
        return method.remote(*args, **kwargs)

    # ------------------------------------------------------------------ objects
    def put(self, value):
        return self.ray.put(value)

    @_translating_errors
    def get_values(self, object_ids, timeout):
        return self.ray.get(list(object_ids), timeout=timeout)

    @_translating_errors
    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        ready, _ = self.ray.wait(list(object_ids), num_returns=num_returns, timeout=timeout,
                                 fetch_local=fetch_local)
        ready = set(ready)
        return [oid in ready for oid in object_ids]

    def external_id(self, obj, kind):
        ray = self.ray
        if kind == "object":
            ok = isinstance(obj, (ray.ObjectRef, ray.ObjectRefGenerator))
        else:
            ok = isinstance(obj, ray.actor.ActorHandle)
        return obj if ok else None

    def on_ref_unpickled(self, object_id):
        """Ray counts its own refs; rayreact refs do not exist here."""

    # ------------------------------------------------------------------ generator tasks
    def stream_next(self, stream_id, index, timeout, peek=False):
        raise TypeError("rayreact is connected to real Ray: generator tasks return Ray's ObjectRefGenerator, "
                        "not rayreact's")

    def stream_drop(self, stream_id, index):
        """No-op: rayreact generators do not exist while connected (Ray's own clean up after themselves)."""

    # ------------------------------------------------------------------ actors, cancellation
    @_translating_errors
    def kill_actor(self, actor_id, no_restart):
        self.ray.kill(actor_id, no_restart=no_restart)

    @_translating_errors
    def cancel(self, object_id, force, recursive):
        self.ray.cancel(object_id, force=force, recursive=recursive)

    def named_actor(self, name, namespace, make_handle):
        try:
            return self.ray.get_actor(name, namespace=namespace)
        except ValueError:     # Ray's "Failed to look up actor ...": the facade raises its own
            return None

    def list_named_actors(self, all_namespaces):
        return self.ray.util.list_named_actors(all_namespaces=all_namespaces)

    # ------------------------------------------------------------------ resources
    def resources(self, which):
        return dict(self.ray.available_resources() if which == "available" else self.ray.cluster_resources())

    def nodes(self):
        return self.ray.nodes()

    def placement_group_call(self, verb, payload):
        raise NotImplementedError("rayreact.util.placement_group is rayreact's own (one node); connected to a "
                                  "Ray cluster, use real Ray's ray.util.placement_group")

    def get_gpu_ids(self):
        return self.ray.get_gpu_ids()

    # ------------------------------------------------------------------ this process
    def runtime_info(self):
        from rayreact.core.runtime_api import RuntimeInfo

        ctx = self.ray.get_runtime_context()
        task_id, actor_id = ctx.get_task_id(), ctx.get_actor_id()
        pg = ctx.get_placement_group_id()
        return RuntimeInfo(job_id=bytes.fromhex(ctx.get_job_id()), node_id=bytes.fromhex(ctx.get_node_id()),
                           namespace=ctx.namespace, task_id=bytes.fromhex(task_id) if task_id else None,
                           actor_id=bytes.fromhex(actor_id) if actor_id else None,
                           actor_name=ctx.get_actor_name() if actor_id else None,
                           num_restarts=int(bool(actor_id and ctx.was_current_actor_reconstructed)),
                           placement_group=(pg, ctx.should_capture_child_tasks_in_placement_group) if pg else None,
                           assigned_resources=ctx.get_assigned_resources(), is_actor=bool(actor_id))

    def runtime_context(self, make_context):
        return self.ray.get_runtime_context()   # Ray's own, with everything Ray knows

    def current_actor_handle(self):
        return self.ray.get_runtime_context().current_actor

    def current_call_cancelled(self):
        return self.ray.get_runtime_context().is_canceled()

    def request_actor_exit(self):
        """Ray ends the actor itself: ``ray.actor.exit_actor()`` raises (and outside an actor, Ray's error)."""
        self.ray.actor.exit_actor()
        return False

    # ------------------------------------------------------------------ session
    def timeline_events(self):
        return self.ray.timeline()

    def address_info(self):
        ctx = self.ray.get_runtime_context()
        gcs = ctx.gcs_address
        return {
            "node_ip_address": gcs.rsplit(":", 1)[0], "raylet_ip_address": gcs.rsplit(":", 1)[0],
            "redis_address": None, "object_store_address": "", "raylet_socket_name": "", "webui_url": "",
            "session_dir": "", "metrics_export_port": None, "gcs_address": gcs, "address": gcs,
            "node_id": ctx.get_node_id(), "python_version": platform.python_version(),
            "ray_version": self.ray.__version__,
        }

    def finish_submitted(self, timeout):
        """Ray's own exit rules apply to work on its cluster."""
        return 0

    def shutdown(self):
        """Leave the cluster (``ray.shutdown``); inside a Ray worker (adopted connection) a no-op."""
        if not self.adopted:
            disconnect()


def _with_options(twin, options, original):
    defaults = _options_of(original)
    extra = {k: v for k, v in (options or {}).items() if defaults.get(k, _MISSING) != v}
    return twin.options(**extra) if extra else twin


_MISSING = object()


# ---------------------------------------------------------------- connection

_RAYREACT_ONLY_INIT_KEYS = {"_reactor", "_trace"}


def connect(address=None, **init_kwargs) -> RayDelegate:
    """Connect this process to the real Ray cluster at ``address``; return the runtime for ``context.current``.

    Inside a Ray worker the existing connection is adopted and ``address`` ignored.
    ``init_kwargs`` are ``ray.init``'s; ``None`` values are left to Ray's defaults.
    """
    global _connection
    with _lock:
        if _connection is not None:
            if init_kwargs.get("ignore_reinit_error"):
                return _connection
            raise RuntimeError("Maybe you called ray.init twice by accident? rayreact is already connected "
                               "to a Ray cluster.")
        ray = _real_ray()
        adopted = in_ray_worker()
        if not adopted:
            kwargs = {k: v for k, v in init_kwargs.items()
                      if v is not None and k not in _RAYREACT_ONLY_INIT_KEYS}
            if address in ("auto", None) or address.startswith("ray://") or ":" in address:
                ray.init(address=address, **kwargs)
            else:
                raise ValueError(f"Cannot connect to a Ray cluster at {address!r}: expected 'auto', "
                                 "'ray://host:port' or 'host:port'.")
        trace_path = os.environ.get(trace.ENV_VAR)
        if trace_path and not adopted:
            # A traced run (``rayreact compare``) handed to Ray: record it as a Ray run is recorded.
            from . import ray_tracer
            ray_tracer.install(ray, trace_path)
        _connection = RayDelegate(ray, adopted)
        return _connection


def disconnect():
    """Leave the cluster (``ray.shutdown``); a worker's adopted connection stays up."""
    global _connection
    with _lock:
        rt, _connection = _connection, None
        if rt is not None and not rt.adopted:
            rt.ray.shutdown()


def client(address=None):
    """``ray.client(address)``: Ray Client's builder, from real Ray."""
    return _real_ray().client(address)


# ---------------------------------------------------------------- rayreact objects -> real Ray twins

def _target_of(obj):
    for name in ("_rayreact_target", "_function", "_cls"):
        target = getattr(obj, name, None)
        if target is not None:
            return target
    raise TypeError(f"to_ray: {type(obj).__name__} is not a rayreact RemoteFunction or ActorClass")


def _options_of(obj):
    for name in ("_rayreact_options", "_default_options"):
        options = getattr(obj, name, None)
        if options is not None:
            return dict(options)
    return {}


def to_ray(obj):
    """The real ``ray.remote(...)`` twin of a rayreact RemoteFunction or ActorClass.

    Built on first use in each process and cached on the object (``_ray_twin``),
    so rayreact objects made before ``init`` (or unpickled inside a Ray worker)
    work.  Real Ray objects and anything else are returned unchanged.
    """
    if not hasattr(obj, "_ray_twin") and not hasattr(obj, "_rayreact_target"):
        return obj
    twin = getattr(obj, "_ray_twin", None)
    if twin is not None:
        return twin
    ray = _connection.ray if _connection is not None else _real_ray()
    target, options = _target_of(obj), _options_of(obj)
    from . import ray_tracer
    twin = ray_tracer.remote_on_behalf_of(ray, target, options, getattr(target, "__module__", None))
    try:
        obj._ray_twin = twin
    except AttributeError:
        pass
    return twin


# ---------------------------------------------------------------- errors

def _dual_exception(exc):
    """``exc`` (raised by real Ray) as an instance of both Ray's and rayreact's class of that name."""
    from rayreact import exceptions as rr

    ray_cls = type(exc)
    rr_cls = None
    for base in ray_cls.__mro__:
        candidate = getattr(rr, base.__name__, None)
        if isinstance(candidate, type) and issubclass(candidate, BaseException) \
                and base.__module__.partition(".")[0] == "ray":
            rr_cls = candidate
            break
    if rr_cls is None or isinstance(exc, rr_cls):
        return exc
    dual = _dual_exception_classes.get((ray_cls, rr_cls))
    if dual is None:
        try:
            dual = type(ray_cls.__name__, (ray_cls, rr_cls), {"__module__": ray_cls.__module__})
            dual.__qualname__ = ray_cls.__qualname__
        except TypeError:  # incompatible layouts: keep Ray's class
            return exc
        _dual_exception_classes[(ray_cls, rr_cls)] = dual
    new = dual.__new__(dual)
    new.__dict__.update(getattr(exc, "__dict__", {}))
    new.args = exc.args
    new.__cause__ = exc.__cause__
    new.__traceback__ = exc.__traceback__
    return new
