"""Record rayreact's trace events from a script running under real Ray.

:func:`install` replaces ``ray.remote`` (and ``ray.wait``) of a Ray-compatible
module with tracing versions, before the user's script runs.  Tracing lives in
the decorated objects themselves, so it runs wherever Ray executes them, in
Ray's worker processes:

* a remote **function** is replaced by a wrapper with the same name, signature
  (``__wrapped__``) and kind (generator, coroutine) that writes a ``task`` event;
* an actor **class** is replaced by a subclass of the same name whose public
  methods write ``actor_call`` events and whose ``__init__`` writes the
  ``actor_create`` event.  The actor's key is assigned where ``.remote()`` is
  called (:func:`rayreact.core.trace.actor_key`) by a thin stand-in for the
  actor class, and travels to the actor as a hidden keyword argument that the
  subclass removes before the user's ``__init__`` sees the arguments.

Only user code is traced: classes and functions that Ray's own modules decorate
(the queue actor, pool workers) are left alone, as rayreact's are.  The same
wrapper works on rayreact (``backend="rayreact"``); ``rayreact compare`` uses it
there only when asked to (``--rayreact-trace wrap``), since rayreact records
natively.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading

from rayreact.core import trace

HIDDEN_KWARG = "__rayreact_trace__"
_MARK = "_rayreact_traced"


def install(ray_module, trace_path):
    """Make ``ray_module.remote``, ``.wait`` and ``.kill`` trace into ``trace_path``."""
    if getattr(ray_module.remote, _MARK, False):
        return
    trace_path = str(trace_path)
    backend = ray_module.__name__
    real_remote = ray_module.remote
    real_wait = ray_module.wait
    real_kill = ray_module.kill
    writer = trace.writer_for(trace_path)

    @functools.wraps(real_remote)
    def remote(*args, **kwargs):
        module = sys._getframe(1).f_globals.get("__name__")
        if len(args) == 1 and not kwargs and callable(args[0]):
            return _decorate(real_remote, args[0], {}, module, trace_path, backend)
        real_decorator = real_remote(*args, **kwargs)  # lets Ray validate the options now

        def decorator(obj):
            return _decorate(real_remote, obj, kwargs, module, trace_path, backend, real_decorator)

        return decorator

    @functools.wraps(real_wait)
    def wait(*args, **kwargs):
        ready, pending = real_wait(*args, **kwargs)
        if pending:
            trace.record_wait(writer, partial=True)
        return ready, pending

    @functools.wraps(real_kill)
    def kill(actor, *args, **kwargs):
        no_restart = kwargs.get("no_restart", args[0] if args else True)
        key = _KEY_BY_ACTOR_ID.get(_actor_id_of(actor))
        if key is not None and no_restart:
            trace.record_kill(writer, key)
        return real_kill(actor, *args, **kwargs)

    setattr(remote, _MARK, True)
    setattr(wait, _MARK, True)
    remote._real_remote = real_remote
    remote._trace_path = trace_path
    ray_module.remote = remote
    ray_module.wait = wait
    ray_module.kill = kill


def remote_on_behalf_of(ray_module, obj, options, module):
    """``ray_module.remote(**options)(obj)`` for an object that ``module`` defined, traced as that module's
    code would be where :func:`install` traced ``ray_module`` (rayreact's delegate makes the Ray twins of a
    user's functions and classes: the caller is rayreact, the code is the user's)."""
    remote = ray_module.remote
    real_remote = getattr(remote, "_real_remote", None)
    if real_remote is None:
        return remote(**options)(obj) if options else remote(obj)
    real_decorator = real_remote(**options) if options else None
    return _decorate(real_remote, obj, options, module, remote._trace_path, ray_module.__name__, real_decorator)


def _ensure_installed(backend, trace_path):
    """In a worker process: trace what user code decorates there too (nested definitions)."""
    module = sys.modules.get(backend)
    if module is not None and not getattr(module.remote, _MARK, False):
        install(module, trace_path)


def _decorate(real_remote, obj, options, module, trace_path, backend, real_decorator=None):
    decorate = real_decorator or real_remote
    if not trace.is_user_code(module):
        return decorate(obj)
    if inspect.isclass(obj):
        traced = traced_actor_subclass(obj, trace_path, backend)
        return TracedActorClass(decorate(traced), obj, _is_concurrent(obj, options))
    return decorate(traced_function(obj, trace_path, backend))


def _is_concurrent(cls, options):
    if any(inspect.iscoroutinefunction(m) or inspect.isasyncgenfunction(m)
           for _, m in inspect.getmembers(cls, inspect.isfunction)):
        return True
    return (options.get("max_concurrency") or 1) > 1 or bool(options.get("concurrency_groups"))


# ---------------------------------------------------------------- tasks

def traced_function(fn, trace_path, backend):
    """``fn`` wrapped to write one ``task`` event per execution."""
    target = trace.function_target(fn)

    def scope(args, kwargs):
        _ensure_installed(backend, trace_path)
        return trace.executing(trace.writer_for(trace_path), "task", target, None, None, args, kwargs)

    if inspect.isgeneratorfunction(fn):
        def task(*args, **kwargs):
            with scope(args, kwargs) as call:
                items = []
                for item in fn(*args, **kwargs):
                    items.append(trace.digest(item))
                    yield item
                call.set_result_items(items)
    elif inspect.iscoroutinefunction(fn):
        async def task(*args, **kwargs):
            with scope(args, kwargs) as call:
                result = await fn(*args, **kwargs)
                call.set_result(result)
            return result
    else:
        def task(*args, **kwargs):
            with scope(args, kwargs) as call:
                result = fn(*args, **kwargs)
                call.set_result(result)
            return result
    return functools.wraps(fn)(task)


# ---------------------------------------------------------------- actors

class _ActorState:
    """Key and call counter of the actor living in this process."""

    def __init__(self, key):
        self.key = key
        self._next = 0
        self._lock = threading.Lock()

    def next_seq(self):
        with self._lock:
            seq = self._next
            self._next += 1
        return seq


# One actor per worker process under Ray; keyed by instance all the same.
_ACTORS: dict = {}


# Actor keys by actor id, for the handles this process created (the ones it can kill by key).
_KEY_BY_ACTOR_ID = {}


def _actor_id_of(handle):
    actor_id = getattr(handle, "_actor_id", None)
    return actor_id.hex() if hasattr(actor_id, "hex") else None


# Closures below are pickled by value into Ray's workers; they must reach this
# process' state through module-level functions (pickled by reference), never
# by naming a mutable global themselves (which would pickle a copy).
def _register_actor(instance, key):
    state = _ActorState(key)
    _ACTORS[id(instance)] = state
    return state


def _state_of(instance):
    state = _ACTORS.get(id(instance))
    if state is None:
        state = _ACTORS.setdefault(id(instance), _ActorState(f"{type(instance).__name__}#?"))
    return state


def traced_actor_subclass(cls, trace_path, backend):
    """A subclass of ``cls`` with the same name whose remote calls write events."""
    namespace = {"__init__": _traced_init(cls, trace_path, backend)}
    for name, raw in _own_functions(cls).items():
        namespace[name] = _traced_method(raw, name, trace_path)
    sub = type(cls.__name__, (cls,), namespace)
    sub.__qualname__ = cls.__qualname__
    sub.__module__ = cls.__module__
    sub.__doc__ = cls.__doc__
    return sub


def _own_functions(cls):
    """Plain methods visible on ``cls`` (MRO order, later classes overridden), dunders excluded."""
    found = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, raw in vars(klass).items():
            if name.startswith("__") and name.endswith("__"):
                continue
            if inspect.isfunction(raw):
                found[name] = raw
            else:
                found.pop(name, None)
    return found


def _traced_init(cls, trace_path, backend):
    user_init = cls.__init__
    class_name = cls.__name__

    def __init__(self, *args, **kwargs):
        info = kwargs.pop(HIDDEN_KWARG, None) or {}
        _ensure_installed(backend, trace_path)
        state = _register_actor(self, info.get("key", f"{class_name}#?"))
        with trace.executing(trace.writer_for(trace_path), "actor_create", state.key, "__init__",
                             state.next_seq(), args, kwargs, owner=self,
                             concurrent=bool(info.get("concurrent", False))):
            user_init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = getattr(user_init, "__doc__", None)
    return __init__


def _traced_method(fn, name, trace_path):
    def scope(self, args, kwargs):
        state = _state_of(self)
        return trace.executing(trace.writer_for(trace_path), "actor_call", state.key, name,
                               state.next_seq(), args, kwargs, owner=self)

    def is_self_call(self):
        current = trace.current_call()
        return current is not None and current.owner is self

    if inspect.isasyncgenfunction(fn):
        async def method(self, *args, **kwargs):
            if is_self_call(self):
                async for item in fn(self, *args, **kwargs):
                    yield item
                return
            with scope(self, args, kwargs) as call:
                items = []
                async for item in fn(self, *args, **kwargs):
                    items.append(trace.digest(item))
                    yield item
                call.set_result_items(items)
    elif inspect.isgeneratorfunction(fn):
        def method(self, *args, **kwargs):
            if is_self_call(self):
                return (yield from fn(self, *args, **kwargs))
            with scope(self, args, kwargs) as call:
                items = []
                for item in fn(self, *args, **kwargs):
                    items.append(trace.digest(item))
                    yield item
                call.set_result_items(items)
    elif inspect.iscoroutinefunction(fn):
        async def method(self, *args, **kwargs):
            if is_self_call(self):
                return await fn(self, *args, **kwargs)
            with scope(self, args, kwargs) as call:
                result = await fn(self, *args, **kwargs)
                call.set_result(result)
            return result
    else:
        def method(self, *args, **kwargs):
            if is_self_call(self):
                return fn(self, *args, **kwargs)
            with scope(self, args, kwargs) as call:
                result = fn(self, *args, **kwargs)
                call.set_result(result)
            return result
    return functools.wraps(fn)(method)


class TracedActorClass:
    """Stands in for the backend's actor class: assigns each new actor its key."""

    def __init__(self, backend_class, user_class, concurrent):
        self._backend_class = backend_class
        self._user_class = user_class
        self._concurrent = concurrent

    def remote(self, *args, **kwargs):
        return self._create({}, args, kwargs)

    def options(self, **options):
        return _TracedActorOptions(self, options)

    def _create(self, options, args, kwargs):
        _check_init_arguments(self._user_class, args, kwargs)
        concurrent = self._concurrent or (options.get("max_concurrency") or 1) > 1 \
            or bool(options.get("concurrency_groups"))
        info = {"key": trace.actor_key(self._user_class.__name__), "concurrent": concurrent}
        target = self._backend_class.options(**options) if options else self._backend_class
        handle = target.remote(*args, **{**kwargs, HIDDEN_KWARG: info})
        actor_id = _actor_id_of(handle)
        if actor_id is not None:
            _KEY_BY_ACTOR_ID.setdefault(actor_id, info["key"])
        return handle

    def __getattr__(self, name):
        backend_class = self.__dict__.get("_backend_class")
        if backend_class is None:  # half-built (unpickling): no forwarding yet
            raise AttributeError(name)
        return getattr(backend_class, name)

    def __repr__(self):
        return f"<traced actor class {self._user_class.__qualname__}>"


class _TracedActorOptions:
    def __init__(self, actor_class, options):
        self._actor_class = actor_class
        self._options = options

    def remote(self, *args, **kwargs):
        return self._actor_class._create(self._options, args, kwargs)

    def options(self, **more):
        return _TracedActorOptions(self._actor_class, {**self._options, **more})


def _check_init_arguments(cls, args, kwargs):
    """Arity errors at submission, as without the wrapper (its ``__init__`` takes anything)."""
    init = cls.__init__
    if init is object.__init__:
        if args or kwargs:
            raise TypeError(f"{cls.__name__}() takes no arguments")
        return
    try:
        sig = inspect.signature(init)
    except (TypeError, ValueError):
        return
    sig.bind(None, *args, **kwargs)
