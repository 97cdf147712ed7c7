"""Multi-node through real Ray: every API call carried out by a real Ray cluster.

When ``init(address="auto" | "ray://..." | "host:port")`` (or ``RAY_ADDRESS``) names
a cluster, rayreact does not grow one of its own: the facade calls
:func:`connect` and from then on hands each call to real Ray.  Objects are Ray's
own: ``.remote()`` returns real ``ray.ObjectRef``\\ s and real actor handles, so
Ray serializes, resolves and reference-counts them exactly as it always does,
nested refs and handles passed between tasks included.

Wiring (what the facade does; see also ``compat_tests/README.md``):

* ``init``: ``if address is not None or delegate.in_ray_worker():``
  ``context.current = delegate.connect(address, **init_kwargs)``.  Inside a Ray
  worker (user code that calls rayreact's API from a task running on the
  cluster) :func:`connect` adopts the worker's existing Ray connection.
* ``get``, ``put``, ``wait``, ``kill``, ``cancel``, ``get_actor`` and the other
  top-level functions: ``if _delegate is not None: return
  delegate.<same name>(...)`` before anything else (they take Ray's objects).
* ``RemoteFunction.remote`` / ``ActorClass.remote`` reach
  :meth:`DelegateRuntime.submit_task` / :meth:`DelegateRuntime.create_actor`
  through ``context.current``; both build the real ``ray.remote`` twin of the
  rayreact object lazily with :func:`to_ray`, so objects decorated before
  ``init`` (or unpickled in a worker) work.

Errors that real Ray raises out of ``get``/``wait`` are re-raised as instances of
*both* Ray's class and rayreact's class of the same name (a ``RayTaskError`` also
stays an instance of the user's exception class), so ``except`` clauses written
against either module catch them.

A script started by ``rayreact run`` has ``ray`` aliased to rayreact; real Ray
needs its own name, so :func:`connect` removes the alias (code already holding
rayreact keeps it; later ``import ray.X`` gets real Ray, which then does the work
anyway).
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading

_lock = threading.RLock()
_runtime = None  # the DelegateRuntime of this process, while connected
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
    return _runtime is not None


# ---------------------------------------------------------------- connection

_RAYREACT_ONLY_INIT_KEYS = {"_reactor", "_trace"}


class DelegateRuntime:
    """``context.current`` while connected: the facade's runtime calls, done by real Ray."""

    is_driver = True
    is_actor = False
    local_mode = False

    def __init__(self, ray, adopted):
        self.ray = ray
        self.adopted = adopted  # True inside a Ray worker: the connection is not ours to close
        ctx = ray.get_runtime_context()
        self.namespace = ctx.namespace
        self.node_id = bytes.fromhex(ctx.get_node_id())
        self.job_id = bytes.fromhex(ctx.get_job_id())
        self.is_driver = not adopted

    # The facade's object-level entry points.
    def submit_task(self, remote_function, args, kwargs, options):
        return _with_options(to_ray(remote_function), options, remote_function).remote(*args, **kwargs)

    def create_actor(self, actor_class, args, kwargs, options):
        return _with_options(to_ray(actor_class), options, actor_class).remote(*args, **kwargs)

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        method = getattr(handle, info.name)
        if num_returns is not None and num_returns != info.num_returns:
            method = method.options(num_returns=num_returns)
        return method.remote(*args, **kwargs)

    def resources(self, which):
        return dict(self.ray.available_resources() if which == "available" else self.ray.cluster_resources())

    def get_actor_info(self, name, namespace=None):
        raise RuntimeError("rayreact is connected to real Ray: route get_actor to rayreact.compat.delegate.get_actor")

    def get_gpu_ids(self):
        return self.ray.get_gpu_ids()

    # Reference bookkeeping of rayreact's own objects: nothing to track here.
    def on_ref_unpickled(self, object_id):
        pass

    def shutdown(self):
        disconnect()


def _with_options(twin, options, original):
    defaults = _options_of(original)
    extra = {k: v for k, v in (options or {}).items() if defaults.get(k, _MISSING) != v}
    return twin.options(**extra) if extra else twin


_MISSING = object()


def connect(address=None, **init_kwargs) -> DelegateRuntime:
    """Connect this process to the real Ray cluster at ``address``; return the facade's runtime.

    Inside a Ray worker the existing connection is adopted and ``address`` ignored.
    ``init_kwargs`` are ``ray.init``'s; ``None`` values are left to Ray's defaults.
    """
    global _runtime
    with _lock:
        if _runtime is not None:
            if init_kwargs.get("ignore_reinit_error"):
                return _runtime
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
        _runtime = DelegateRuntime(ray, adopted)
        return _runtime


def disconnect():
    """Leave the cluster (``ray.shutdown``); a worker's adopted connection stays up."""
    global _runtime
    with _lock:
        rt, _runtime = _runtime, None
        if rt is not None and not rt.adopted:
            rt.ray.shutdown()


def address_info() -> dict:
    ray = _runtime.ray if _runtime is not None else _real_ray()
    ctx = ray.get_runtime_context()
    gcs = ctx.gcs_address
    return {"address": gcs, "gcs_address": gcs, "node_id": ctx.get_node_id(),
            "node_ip_address": gcs.rsplit(":", 1)[0], "ray_version": ray.__version__}


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
    ray = _runtime.ray if _runtime is not None else _real_ray()
    target, options = _target_of(obj), _options_of(obj)
    twin = ray.remote(**options)(target) if options else ray.remote(target)
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


# ---------------------------------------------------------------- the top-level API, by real Ray

def _ray():
    if _runtime is None:
        if not in_ray_worker():
            raise RuntimeError("rayreact is not connected to a Ray cluster")
        connect(None)  # user code running inside a Ray worker: adopt its connection
    return _runtime.ray


@_translating_errors
def get(object_refs, *, timeout=None, **kwargs):
    return _ray().get(object_refs, timeout=timeout, **kwargs)


@_translating_errors
def wait(ray_waitables, *, num_returns=1, timeout=None, fetch_local=True):
    return _ray().wait(ray_waitables, num_returns=num_returns, timeout=timeout, fetch_local=fetch_local)


def put(value, **kwargs):
    return _ray().put(value, **kwargs)


@_translating_errors
def kill(actor, *, no_restart=True):
    return _ray().kill(actor, no_restart=no_restart)


@_translating_errors
def cancel(ray_waitable, *, force=False, recursive=True):
    return _ray().cancel(ray_waitable, force=force, recursive=recursive)


@_translating_errors
def get_actor(name, namespace=None):
    return _ray().get_actor(name, namespace=namespace)


def available_resources():
    return _ray().available_resources()


def cluster_resources():
    return _ray().cluster_resources()


def nodes():
    return _ray().nodes()


def timeline(filename=None):
    return _ray().timeline(filename=filename)


def get_runtime_context():
    return _ray().get_runtime_context()


def get_gpu_ids():
    return _ray().get_gpu_ids()


def remote(*args, **kwargs):
    """Decorate with real Ray directly (the facade may keep its own objects instead)."""
    return _ray().remote(*args, **kwargs)
