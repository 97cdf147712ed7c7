"""The top-level API functions; each checks its arguments and hands the work to the runtime serving this process.

That runtime is ``core.context.current``, an implementation of the runtime protocol
(:class:`rayreact.core.runtime_api.RuntimeAPI`): in the driver
:class:`rayreact.core.runtime.Runtime` (or the local-mode runtime, or real Ray's
delegate when ``init(address=...)`` connects to a cluster); inside a worker the
worker itself, which forwards nested calls to the driver.  The functions here call
the protocol only, never asking which runtime it is.
"""

from __future__ import annotations

import atexit
import inspect
import sys
import logging
import os
import threading
import warnings

from . import exceptions
from .actor import ActorClass, ActorHandle
from .core import context
from .object_ref import ObjectRef
from .remote_function import RemoteFunction
from . import options as _options

_init_lock = threading.RLock()


class RayContext(dict):
    """What ``init`` returns: ``address_info`` and friends; usable as a context manager."""

    def __init__(self, info):
        super().__init__(info)
        self.address_info = info
        self.dashboard_url = info.get("webui_url", "")
        self.python_version = info.get("python_version")
        self.ray_version = info.get("ray_version")
        self.ray_commit = "rayreact"

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutdown()

    def disconnect(self):
        shutdown()


def _runtime():
    rt = context.current
    if rt is None:
        context.refuse_if_forked()
        if os.environ.get("RAY_ENABLE_AUTO_CONNECT", "") == "0":
            # Ray's switch for scripts that must not start a session by accident (read at each call, as Ray).
            raise exceptions.RaySystemError("Ray has not been started yet. You can start Ray with 'ray.init()'.")
        with _init_lock:
            if context.current is None:
                init()
        rt = context.current
    return rt


context.start_sessions_with(_runtime)


def _in_ray_worker():
    from .compat import delegate
    return delegate.in_ray_worker()


def _external_id(obj, kind):
    """The id the runtime knows ``obj`` by when it is not a rayreact ref or handle (real Ray's, with the
    delegate); None otherwise, and always None before init."""
    rt = context.current
    return None if rt is None else rt.external_id(obj, kind)


_INIT_KEYWORDS = {
    "address", "num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "local_mode",
    "ignore_reinit_error", "include_dashboard", "dashboard_host", "dashboard_port", "job_config",
    "configure_logging", "logging_level", "logging_format", "logging_config", "log_to_driver", "namespace",
    "runtime_env", "enable_resource_isolation", "cgroup_path", "system_reserved_cpu", "system_reserved_memory",
    "proxy_server_url", "storage", "_system_config", "_temp_dir", "_node_ip_address", "_enable_object_reconstruction",
    "_plasma_directory", "_object_spilling_directory", "_memory", "_redis_password", "_java_worker_options",
    "_driver_object_store_memory", "_metrics_export_port", "_tracing_startup_hook", "_node_name",
    "_cluster_id", "_disable_gpu_check", "_reactor", "_trace", "_skip_env_hook", "_worker_process_setup_hook",
}


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None, object_store_memory=None, local_mode=False,
         ignore_reinit_error=False, namespace=None, runtime_env=None, log_to_driver=None, logging_level="info",
         configure_logging=True, _reactor=None, _trace=None, _colocate=None, **kwargs):
    """Start rayreact in this process (or connect to a Ray cluster when ``address`` names one)."""
    for key in kwargs:
        if key not in _INIT_KEYWORDS:
            raise RuntimeError(f"Unknown keyword argument(s): {key}")
    with _init_lock:
        if context.current is not None:
            if ignore_reinit_error:
                logging.getLogger("rayreact").info("Calling ray.init() again after it has already been called.")
                return _context_info()
            raise RuntimeError("Maybe you called ray.init twice by accident? This error can be suppressed by "
                               "passing in 'ignore_reinit_error=True' or by calling 'ray.shutdown()' prior to "
                               "'ray.init()'.")
        context.forked_from = None          # an explicit init() in a forked child starts its own session
        if address is None:
            address = os.environ.get("RAY_ADDRESS") or None
        if address in ("local",):
            address = None
        in_ray_worker = "ray" in sys.modules and _in_ray_worker()
        if address is not None or in_ray_worker:
            from .compat import delegate
            context.current = delegate.connect(address, num_cpus=num_cpus, num_gpus=num_gpus, resources=resources,
                                               namespace=namespace, runtime_env=runtime_env,
                                               ignore_reinit_error=ignore_reinit_error, **kwargs)
            return _context_info()
        job_config = kwargs.get("job_config")
        default_actor_lifetime = None
        if job_config is not None:
            from .job_config import JobConfig
            if not isinstance(job_config, JobConfig):
                raise TypeError(f"job_config must be a ray.job_config.JobConfig, not {type(job_config).__name__}")
            # As in Ray, init's own namespace= and runtime_env= win over the job config's.
            if namespace is None:
                namespace = job_config.ray_namespace
            if runtime_env is None and job_config.runtime_env:
                runtime_env = job_config.runtime_env
            default_actor_lifetime = job_config.default_actor_lifetime
        if runtime_env is not None and not isinstance(runtime_env, dict):
            runtime_env = dict(runtime_env)
        if runtime_env:
            for key in runtime_env:
                if key not in ("env_vars", "working_dir", "py_modules", "pip", "conda", "excludes", "config",
                               "container", "image_uri", "uv", "nsight", "worker_process_setup_hook", "java_jars"):
                    raise ValueError(f"Unknown runtime_env field: {key}")
        if _reactor is None:
            _reactor = os.environ.get("RAYREACT_REACTOR", "1") not in ("0", "false", "off", "no")
        if _trace is None:
            _trace = os.environ.get("RAYREACT_TRACE") or None
        if _colocate is None:
            from .core.colocation import wanted_by_environment
            _colocate = wanted_by_environment()
        if local_mode:
            from .core.local_mode import LocalRuntime
            context.current = LocalRuntime(namespace=namespace, runtime_env=runtime_env,
                                           num_cpus=num_cpus, num_gpus=num_gpus, resources=resources)
        else:
            from .core.runtime import Runtime
            rt = Runtime(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources,
                         object_store_memory=object_store_memory, namespace=namespace, runtime_env=runtime_env,
                         log_to_driver=True if log_to_driver is None else log_to_driver,
                         default_actor_lifetime=default_actor_lifetime, colocate=bool(_colocate))
            if _reactor:
                from .core.replay import Reactor
                rt = Reactor(rt)            # in front of the dynamic runtime: every API call reaches it first
            context.current = rt
        _register_atexit()
        return _context_info()


_atexit_registered = False


def _register_atexit():
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True


#: How long a clean exit waits for tasks and actor calls still running (``RAYREACT_EXIT_TIMEOUT_S``).
EXIT_TIMEOUT_S = 10.0


def _shutdown_at_exit():
    # Ray's driver exit lets the work it submitted finish (its workers run what they were given while the
    # session winds down); here a clean exit waits for it, up to a bound, and says when it gives up.
    # After an unhandled exception or Ctrl-C the script did not end by choice: stop at once.
    rt = context.current
    if rt is not None and rt.is_driver and getattr(sys, "last_value", None) is None:
        try:
            timeout = float(os.environ.get("RAYREACT_EXIT_TIMEOUT_S", EXIT_TIMEOUT_S))
            unfinished = rt.finish_submitted(timeout)
            if unfinished:
                print(f"rayreact: {unfinished} results of tasks or actor calls were still unfinished {timeout:g} s "
                      "after the script ended; stopping them (set RAYREACT_EXIT_TIMEOUT_S to wait longer)",
                      file=sys.stderr)
        except BaseException:  # noqa: BLE001 - a second Ctrl-C, or any failure here, still shuts down
            pass
    try:
        shutdown()
    except Exception:
        pass


def _context_info():
    return RayContext(context.current.address_info())


def shutdown(_exiting_interpreter=False, **kwargs):
    """Stop every worker and free every shared segment of this session."""
    with _init_lock:
        rt = context.current
        if rt is None:
            return
        if rt.is_driver:
            context.current = None
        rt.shutdown()   # where this process does not own the session (a worker), a no-op


def is_initialized():
    rt = context.current
    return rt is not None


def _check_connected():
    rt = context.current
    return rt


def put(value, *, _owner=None, _tensor_transport=None):
    return _runtime().put(value)


def get(object_refs, *, timeout=None, _use_object_store=False):
    """Values of ``object_refs`` (one ref or a list), waiting up to ``timeout`` seconds."""
    rt = context.current
    if rt is None:
        rt = _runtime()
    if isinstance(object_refs, ObjectRef):
        return rt.get_values([object_refs._id], _timeout(timeout))[0]
    if isinstance(object_refs, (list, tuple)):
        ids = []
        for r in object_refs:
            if isinstance(r, ObjectRef):
                ids.append(r._id)
            elif (oid := rt.external_id(r, "object")) is not None:
                ids.append(oid)
            else:
                raise TypeError(f"Attempting to call `get` on the value {r!r}, which is not an ray.ObjectRef.")
        return rt.get_values(ids, _timeout(timeout))
    if (oid := rt.external_id(object_refs, "object")) is not None:
        return rt.get_values([oid], _timeout(timeout))[0]
    if hasattr(object_refs, "__ray_get__"):     # the argument's own protocol, not the runtime's
        return object_refs.__ray_get__(timeout)
    raise ValueError("'object_refs' must either be an ObjectRef or a list of ObjectRefs. "
                     f"Got: {type(object_refs)}.")


def _timeout(timeout):
    # As in Ray, a negative timeout waits without limit (wait() rejects one; get() does not).
    if timeout is not None and timeout < 0:
        return None
    return timeout


def wait(ray_waitables, *, num_returns=1, timeout=None, fetch_local=True):
    """Split refs into (ready, not ready) once ``num_returns`` are ready or ``timeout`` passes."""
    if isinstance(ray_waitables, ObjectRef):
        raise TypeError("wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, got a single "
                        "ray.ObjectRef")
    if not isinstance(ray_waitables, (list, tuple)):
        raise TypeError("wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, got "
                        f"{type(ray_waitables)}")
    ids = []
    for r in ray_waitables:
        if isinstance(r, ObjectRef):
            ids.append(r._id)
        elif (oid := _external_id(r, "object")) is not None:
            ids.append(oid)
        else:
            raise TypeError("wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, got list "
                            f"containing {type(r)}")
    if timeout is not None and timeout < 0:
        raise ValueError(f"The 'timeout' argument must be nonnegative. Received {timeout}")
    if len(set(ray_waitables)) != len(ray_waitables):
        raise ValueError("Wait requires a list of unique ray_waitables.")
    if not ray_waitables:
        return [], []
    if num_returns <= 0:
        raise ValueError("Invalid number of objects to return %d." % num_returns)
    if num_returns > len(ray_waitables):
        raise ValueError("num_returns cannot be greater than the number of ray_waitables provided: "
                         f"{num_returns} > {len(ray_waitables)}")
    flags = _runtime().wait_ids(ids, num_returns, timeout, fetch_local)
    ready, not_ready = [], []
    for r, f in zip(ray_waitables, flags):
        if f and len(ready) < num_returns:
            ready.append(r)
        else:
            not_ready.append(r)
    return ready, not_ready


def remote(*args, **kwargs):
    """``@remote`` on a function or class, bare or with options."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return _make_remote(args[0], {})
    if args:
        raise TypeError(_options.decorator_misuse_message())
    if not kwargs:
        raise AssertionError(_options.decorator_misuse_message())

    def decorator(target):
        return _make_remote(target, kwargs)

    return decorator


def _make_remote(target, opts):
    if inspect.isclass(target):
        _options.validate_actor_options(opts)
        return ActorClass(target, opts)
    if inspect.isfunction(target) or inspect.isbuiltin(target) or inspect.ismethod(target) or callable(target):
        if "max_restarts" in opts or "max_concurrency" in opts or "lifetime" in opts:
            raise TypeError("The @ray.remote decorator must be applied to either a function or a class.")
        _options.validate_task_options(opts)
        return RemoteFunction(target, opts)
    raise TypeError("The @ray.remote decorator must be applied to either a function or a class.")


def kill(actor, *, no_restart=True):
    actor_id = actor._actor_id if isinstance(actor, ActorHandle) else _external_id(actor, "actor")
    if actor_id is None:
        raise ValueError(f"ray.kill() only supported for actors. For tasks, try ray.cancel(). Got: {type(actor)}.")
    _runtime().kill_actor(actor_id, no_restart)


def cancel(ray_waitable, *, force=False, recursive=True):
    object_id = ray_waitable._id if isinstance(ray_waitable, ObjectRef) else _external_id(ray_waitable, "object")
    if object_id is None:
        raise TypeError(f"ray.cancel() only supported for object refs. For actors, try ray.kill(). "
                        f"Got: {type(ray_waitable)}.")
    _runtime().cancel(object_id, force, recursive)


def _weak_handle(actor_id, class_name, methods):
    return ActorHandle(actor_id, class_name, methods, weak=True)   # as in Ray, a handle found by name keeps nothing alive


def get_actor(name, namespace=None):
    if not name:
        raise ValueError("Please supply a non-empty value to get_actor")
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError("namespace must be None or a string.")
    handle = _runtime().named_actor(name, namespace, _weak_handle)
    if handle is None:
        raise ValueError(f"Failed to look up actor with name '{name}'. This could because 1. You are trying to "
                         "look up a named actor you didn't create. 2. The named actor died. 3. You did not use a "
                         "namespace matching the namespace of the actor.")
    return handle


def get_gpu_ids():
    return _runtime().get_gpu_ids()


def available_resources():
    return _runtime().resources("available")


def cluster_resources():
    return _runtime().resources("total")


def nodes():
    return _runtime().nodes()


def timeline(filename=None):
    """Chrome-trace events of executed calls (Perfetto / chrome://tracing)."""
    events = _runtime().timeline_events()
    if filename is not None:
        import json
        with open(filename, "w") as f:
            json.dump(events, f)
        return None
    return events


def get_runtime_context():
    from .runtime_context import RuntimeContext
    return _runtime().runtime_context(RuntimeContext)


def _future_of(ref):
    import concurrent.futures
    fut = concurrent.futures.Future()

    def resolve():
        try:
            fut.set_result(get(ref))
        except BaseException as exc:  # noqa: BLE001
            fut.set_exception(exc)

    threading.Thread(target=resolve, daemon=True, name="rayreact-future").start()
    return fut


def java_function(class_name, function_name):
    raise NotImplementedError("Cross-language (Java) calls are not supported by rayreact.")


def java_actor_class(class_name):
    raise NotImplementedError("Cross-language (Java) actors are not supported by rayreact.")


def cpp_function(function_name):
    raise NotImplementedError("Cross-language (C++) calls are not supported by rayreact.")


def client(address=None, _deprecation_warn_enabled=True):
    from .compat import delegate
    return delegate.client(address)
