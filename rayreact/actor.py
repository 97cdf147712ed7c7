"""Actors: ``ActorClass`` (what ``@remote`` makes of a class), ``ActorHandle`` and ``ActorMethod``."""

from __future__ import annotations

import inspect

from ._arity import arity_check
from . import options as _options
from .core import context, handles, refcount, serialization


def method(*args, **kwargs):
    """``@ray.method(num_returns=...)``: per-method options."""
    valid = {"num_returns", "concurrency_group", "max_task_retries", "retry_exceptions", "_generator_backpressure_num_objects",
             "enable_task_events", "tensor_transport"}
    if args or not kwargs:
        raise ValueError("The @ray.method decorator must be applied using at least one of the arguments "
                         f"in the list {sorted(valid)}, for example '@ray.method(num_returns=2)'.")
    for key in kwargs:
        if key not in valid:
            raise ValueError(f"Unexpected keyword argument to @ray.method: {key}")

    def annotate(fn):
        fn.__ray_method_options__ = dict(kwargs)
        return fn

    return annotate


class ActorClassInheritanceException(TypeError):
    """A class statement named an actor class (``@ray.remote`` result) as a base."""


class MethodInfo:
    """What a caller needs to know about one actor method: plain data, shipped with handles."""

    __slots__ = ("name", "num_returns", "signature", "arity", "is_async", "takes_self", "task_name")

    def __init__(self, name, num_returns, signature, is_async, takes_self, task_name=None):
        self.name = name
        self.num_returns = num_returns
        self.signature = signature
        self.arity = arity_check(signature)
        self.is_async = is_async
        self.takes_self = takes_self
        self.task_name = task_name       # .options(name=...): the call's name (its process title), as in Ray

    def named(self, task_name):
        """This method's info for calls named ``task_name``."""
        info = MethodInfo(self.name, self.num_returns, self.signature, self.is_async, self.takes_self, task_name)
        info.arity = self.arity
        return info

    def __reduce__(self):
        return (MethodInfo, (self.name, self.num_returns, None, self.is_async, self.takes_self, self.task_name))


def _method_table(cls) -> dict:
    table = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("__") and name not in ("__call__",):
            continue
        raw = inspect.getattr_static(cls, name, None)
        if isinstance(raw, staticmethod):
            fn, takes_self = raw.__func__, False
        elif isinstance(raw, classmethod):
            fn, takes_self = raw.__func__, False
        elif inspect.isfunction(member):
            fn, takes_self = member, True
        else:
            continue
        opts = getattr(fn, "__ray_method_options__", {})
        try:
            sig = inspect.signature(fn)
            if takes_self or isinstance(raw, classmethod):
                params = list(sig.parameters.values())[1:]
                sig = sig.replace(parameters=params)
        except (TypeError, ValueError):
            sig = None
        generator = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
        table[name] = MethodInfo(name, opts.get("num_returns", "streaming" if generator else 1), sig,
                                 inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn), takes_self)
    for special in ("__ray_ready__", "__ray_call__", "__ray_terminate__"):
        table[special] = MethodInfo(special, 1, None, False, True)
    return table


class ActorClass:
    """Create actors with ``.remote(...)``; configure with ``.options(...)``."""

    def __init__(self, cls, actor_options: dict):
        self.__ray_actor_class__ = cls
        self._cls = cls
        self._default_options = actor_options
        self._methods = _method_table(cls)
        self._is_async = any(m.is_async for m in self._methods.values())
        try:
            init_sig = inspect.signature(cls.__init__)
            self._init_signature = init_sig.replace(parameters=list(init_sig.parameters.values())[1:])
        except (TypeError, ValueError):
            self._init_signature = None
        if cls.__init__ is object.__init__:
            self._init_signature = inspect.Signature()
        self._code_id = None          # as RemoteFunction's
        self._code_pickle = None
        self._ray_twin = None
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        self.__doc__ = cls.__doc__

    def __getattr__(self, name):
        # Class and static attributes of the user's class, e.g. ``A.X`` inside a method (Ray's actor class
        # subclasses the user's class).
        if name.startswith("__") or "_cls" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["_cls"], name)

    def __dir__(self):
        # As Ray's actor class (a subclass of the user's): its own names, the user class's, the actor specials.
        return sorted(set(super().__dir__()) | set(dir(self._cls)) | set(self._methods))

    def __mro_entries__(self, bases):
        raise ActorClassInheritanceException("Inheriting from actor classes is not currently supported. You can instead inherit from "
                        "a non-actor base class and make the derived class an actor class (with @ray.remote).")

    def __call__(self, *args, **kwargs):
        raise TypeError("Actors cannot be instantiated directly. Instead of "
                        f"'{self._cls.__name__}()', use '{self._cls.__name__}.remote()'.")

    def remote(self, *args, **kwargs):
        return self._remote(args, kwargs, self._default_options)

    def options(self, **actor_options):
        _options.validate_actor_options(actor_options, in_options=True)
        merged = {**self._default_options, **actor_options}
        parent = self

        class _ActorClassWithOptions:
            def remote(self, *args, **kwargs):
                return parent._remote(args, kwargs, merged)

            def options(self, **more):
                return parent.options(**{**actor_options, **more})

        return _ActorClassWithOptions()

    def bind(self, *args, **kwargs):
        raise NotImplementedError("DAG building (.bind) is not supported by rayreact")

    def _remote(self, args, kwargs, actor_options):
        from . import _api
        if self._init_signature is not None:
            try:
                self._init_signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{self._cls.__name__}.__init__() {exc}") from None
        return _api._runtime().create_actor(self, args, kwargs, actor_options)

    def __reduce__(self):
        return (ActorClass, (self._cls, self._default_options))


class ActorHandle:
    """A reference to a live actor; picklable, passable to tasks and other actors.

    Counted like an ObjectRef (see core.handles): while a handle to an actor exists in any process, or
    travels inside a value, a non-detached actor stays alive.  As in Ray, only the handle ``.remote()``
    returned and its copies count; a *weak* handle (found by name, ``get_if_exists``, ``current_actor``)
    and its copies do not.
    """

    def __init__(self, actor_id: bytes, class_name: str, methods: dict, *, original: bool = False,
                 weak: bool = False):
        self._actor_id = actor_id
        self._ray_class_name = class_name
        self._ray_methods = methods
        self._ray_original = original
        self._ray_weak = weak
        if not weak:
            refcount.incref(handles.key_of(actor_id))

    def __del__(self):
        try:
            if not self._ray_weak:
                refcount.decref(handles.key_of(self._actor_id))
        except Exception:  # interpreter teardown
            pass

    def __getattr__(self, name):
        methods = self.__dict__.get("_ray_methods")
        if methods is None or name not in methods:
            raise AttributeError(f"'ActorHandle' object has no attribute '{name}'")
        return ActorMethod(self, methods[name])

    def __dir__(self):
        # Tab completion offers the actor's methods (and the specials), as on a Ray handle.
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_ray_methods") or ()))

    def __reduce__(self):
        if self._ray_weak:
            return (_rebuild_handle, (self._actor_id, self._ray_class_name, self._ray_methods, True))
        serialization.note_contained_ref(handles.key_of(self._actor_id))
        return (_rebuild_handle, (self._actor_id, self._ray_class_name, self._ray_methods))

    def __repr__(self):
        return f"Actor({self._ray_class_name}, {self._actor_id.hex()})"

    def __hash__(self):
        return hash(self._actor_id)

    def __eq__(self, other):
        return isinstance(other, ActorHandle) and other._actor_id == self._actor_id

    @property
    def _ray_actor_id(self):
        from .runtime_context import ActorID
        return ActorID(self._actor_id)


def _rebuild_handle(actor_id, class_name, methods, weak=False):
    return ActorHandle(actor_id, class_name, methods, weak=weak)


handles.serve_handles_with(ActorHandle)


class ActorMethod:
    """``handle.method`` — call with ``.remote(...)``."""

    __slots__ = ("_handle", "_info", "_num_returns")

    def __init__(self, handle, info, num_returns=None):
        self._handle = handle
        self._info = info
        self._num_returns = info.num_returns if num_returns is None else num_returns

    def __call__(self, *args, **kwargs):
        raise TypeError("Actor methods cannot be called directly. Instead of running "
                        f"'object.{self._info.name}()', try 'object.{self._info.name}.remote()'.")

    def remote(self, *args, **kwargs):
        arity = self._info.arity
        if arity is not None:
            arity.check(self._info.name, args, kwargs)
        return context.runtime().submit_actor_call(self._handle, self._info, args, kwargs, self._num_returns)

    def options(self, **method_options):
        for key in method_options:
            if key not in ("num_returns", "name", "concurrency_group", "max_task_retries", "retry_exceptions",
                           "enable_task_events", "_generator_backpressure_num_objects"):
                raise ValueError(f"Invalid option keyword {key} for actor methods.")
        info = self._info
        if method_options.get("name"):
            info = info.named(method_options["name"])
        return ActorMethod(self._handle, info, method_options.get("num_returns", self._num_returns))

    def bind(self, *args, **kwargs):
        raise NotImplementedError("DAG building (.bind) is not supported by rayreact")


def exit_actor():
    """Terminate the current actor after the running method returns (``ray.actor.exit_actor``)."""
    rt = context.current
    if rt is None:
        raise TypeError("exit_actor API is called on a non-actor worker.")
    if rt.request_actor_exit():     # TypeError outside an actor
        # SystemExit would only stop the event loop's thread; as in Ray, a RayError ends the call instead.
        from .exceptions import AsyncioActorExit
        raise AsyncioActorExit()
    raise SystemExit(0)

