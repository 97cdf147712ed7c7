"""Execution traces: what ran, where, with which arguments and which outcome.

A trace is a JSON-lines file with one event per *executed* remote call, written by
whichever process executed it (a worker, or the driver for nothing but ``wait``
markers).  rayreact writes it when ``RAYREACT_TRACE=<path>`` is set; under real Ray
the wrapper of :mod:`rayreact.compat.ray_tracer` writes the very same events from
inside Ray's worker processes.  :mod:`rayreact.compat.diff` compares two traces.

Event fields (one JSON object a line)::

    kind     "task" | "actor_create" | "actor_call" | "wait" | "kill"
    target   task: the function's ``__qualname__``;
             actor: its key, ``<Class>#<n>``, where n counts ``.remote()`` calls on
             actor classes of that name in the creating process, from 0.  Actors
             created inside a remote call are keyed below that call:
             ``<parent call>/<Class>#<n>``, parent call being
             ``<target>.<method>@<seq>`` for an actor method or
             ``<target>(<args digest[:8]>)`` for a task (see :func:`actor_key`).
    method   actor method name; ``"__init__"`` for actor_create; null for tasks
    seq      actor events: position in the actor's call sequence, counted in the
             actor's process in the order calls *start*: ``__init__`` is 0, the
             first method call 1, ...  A restarted actor starts again at 0 with a
             new actor_create event.  Null for tasks.
    args     digest of ``(args, kwargs)`` as the function received them
    result   digest of the return value (the whole tuple for num_returns > 1,
             for generators the digest of the list of the items' digests, see
             ``CallScope.set_result_items``), absent on error
    error    class name of the exception the call raised, absent on success
    concurrent  actor_create only: true for threaded (max_concurrency > 1) and
             async actors, whose calls are compared as a multiset
    pid, t   executing process and start time (ns since the epoch); used only to
             order restarts of an actor, never compared
    args_preview, result_preview   short human-readable renderings for reports,
             never compared

    {"kind": "wait", "partial": true, "pid": ..., "t": ...}  is written when a
    process' ``wait`` returned while some refs were still pending: from there
    on, call order may depend on timing.  Only the real-Ray side writes these.

    {"kind": "kill", "target": <actor key>, "pid": ..., "t": ...}  is written
    when the driver calls ``kill`` (no restart) on an actor it created.  Ray's
    kill is asynchronous: a call sent after it may still run in the actor (its
    caller gets RayActorError all the same), so calls that start after the
    kill are not compared.  Only the real-Ray side writes these.

Digests (:func:`digest`) are 16 hex characters of BLAKE2b over a canonical
encoding that is the same in every process and every run: numpy arrays by dtype,
shape and bytes; dicts and sets sorted; floats by ``repr``; other objects by type
name and ``__dict__``/``__slots__`` recursively; ObjectRefs, actor handles and
ref generators by kind only (their ids differ between runs by design).

Writing is process-safe without locks: every process opens the file with
``O_APPEND`` and writes each event as one ``write`` of one short line.

Hook for the core (rayreact's workers): call :func:`active_writer` once when the
worker starts; when it returns ``None`` tracing is off and costs nothing.
Otherwise wrap each executed call in :func:`executing` (or call
:func:`record_call` afterwards).  See ``compat_tests/README.md``.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import json
import os
import re
import struct
import sys
import threading
import time

ENV_VAR = "RAYREACT_TRACE"

# Type names (anywhere in the MRO) of values whose identity differs between runs by design.
_KIND_BY_TYPE_NAME = {
    "ObjectRef": "ref",
    "ClientObjectRef": "ref",
    "ObjectRefGenerator": "ref_generator",
    "DynamicObjectRefGenerator": "ref_generator",
    "StreamingObjectRefGenerator": "ref_generator",
    "ActorHandle": "actor_handle",
    "ClientActorHandle": "actor_handle",
}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


# ---------------------------------------------------------------- digests

class _Canonical:
    """Feeds a canonical, type-tagged encoding of a value into a hash."""

    def __init__(self, hasher, stack=None):
        self._h = hasher
        self._stack = set() if stack is None else stack  # ids being encoded: cycle detection

    def _sub_digest(self, obj):
        """Digest of a part (dict entries, set members: sorted by digest), same cycle stack."""
        h = hashlib.blake2b(digest_size=8)
        _Canonical(h, self._stack).feed(obj)
        return h.hexdigest()

    def _tag(self, tag, text=""):
        data = text.encode("utf-8", "surrogatepass")
        self._h.update(tag.encode() + struct.pack("<Q", len(data)) + data)

    def feed(self, obj):
        t = type(obj)
        if obj is None or t is bool:
            self._tag("c", repr(obj))
        elif t is int:
            self._tag("i", repr(obj))
        elif t is float:
            self._tag("f", repr(obj))
        elif t is str:
            self._tag("s", obj)
        elif t in (bytes, bytearray):
            self._tag("y", str(len(obj)))
            self._h.update(obj)
        else:
            self._feed_compound(obj, t)

    def _feed_compound(self, obj, t):
        kind = _kind_of(t)
        if kind is not None:
            self._tag("k", kind)
            return
        oid = id(obj)
        if oid in self._stack:
            self._tag("cycle")
            return
        self._stack.add(oid)
        try:
            self._feed_structured(obj, t)
        finally:
            self._stack.discard(oid)

    def _feed_structured(self, obj, t):
        if isinstance(obj, (list, tuple)):
            self._tag("l", _type_name(t))
            self._tag("n", str(len(obj)))
            for item in obj:
                self.feed(item)
        elif isinstance(obj, dict):
            self._tag("d", _type_name(t))
            self._feed_unordered(itertools.chain.from_iterable(
                sorted(((self._sub_digest(k), self._sub_digest(v)) for k, v in obj.items()))))
        elif isinstance(obj, (set, frozenset)):
            self._tag("e", _type_name(t))
            self._feed_unordered(sorted(self._sub_digest(item) for item in obj))
        elif isinstance(obj, memoryview):
            self.feed(obj.tobytes())
        elif _is_numpy_array(obj):
            self._feed_array(obj)
        elif _is_numpy_scalar(obj):
            self._tag("g", obj.dtype.str)
            self._h.update(obj.tobytes())
        elif _is_torch_tensor(obj):
            self._tag("torch", str(obj.dtype))
            self._feed_array(obj.detach().cpu().numpy())
        elif isinstance(obj, BaseException):
            self._tag("x", _type_name(t))
            self.feed(tuple(obj.args))
        elif isinstance(obj, type):
            self._tag("t", _type_name(obj))
        elif callable(obj) and hasattr(obj, "__qualname__"):
            self._tag("fn", getattr(obj, "__qualname__", ""))
        elif isinstance(obj, complex):
            self._tag("z", repr(obj))
        elif type(obj).__name__ == "module":
            self._tag("m", obj.__name__)
        else:
            self._feed_object(obj, t)

    def _feed_unordered(self, digests):
        for d in digests:
            self._tag("h", d)

    def _feed_array(self, arr):
        self._tag("a", arr.dtype.str)
        self._tag("shape", repr(tuple(arr.shape)))
        if arr.dtype.hasobject:
            for item in arr.reshape(-1).tolist():
                self.feed(item)
        else:
            import numpy as np

            self._h.update(np.ascontiguousarray(arr).data)

    def _feed_object(self, obj, t):
        self._tag("o", _type_name(t))
        state = getattr(obj, "__dict__", None)
        slots = _slot_values(obj, t)
        if state is None and not slots:
            if isinstance(obj, float):  # float subclasses without state
                self._tag("f", repr(float(obj)))
            elif isinstance(obj, int):
                self._tag("i", repr(int(obj)))
            elif isinstance(obj, str):
                self._tag("s", str(obj))
            else:
                self._tag("r", _ADDRESS.sub(" at 0x?", _safe_repr(obj)))
            return
        if isinstance(state, dict):
            self.feed(dict(state))
        if slots:
            self.feed(slots)


def _type_name(t):
    return getattr(t, "__qualname__", getattr(t, "__name__", "?"))


def _kind_of(t):
    for base in getattr(t, "__mro__", (t,)):
        kind = _KIND_BY_TYPE_NAME.get(base.__name__)
        if kind is not None:
            return kind
    return None


def _is_numpy_array(obj):
    np = sys.modules.get("numpy")  # a value can only be an array if numpy is loaded
    return np is not None and isinstance(obj, np.ndarray)


def _is_numpy_scalar(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic)


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach") and hasattr(obj, "numpy")


def _slot_values(obj, t):
    names = []
    for klass in getattr(t, "__mro__", ()):
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        names.extend(s for s in slots if s not in ("__dict__", "__weakref__"))
    if not names:
        return None
    return {name: getattr(obj, name, "<unset>") for name in sorted(set(names))}


def _safe_repr(obj):
    try:
        return repr(obj)
    except Exception as e:  # a broken __repr__ must not break tracing
        return f"<unrepresentable {type(e).__name__}>"


def digest(value) -> str:
    """Stable 16-hex-digit digest of ``value`` (same in every process and run)."""
    h = hashlib.blake2b(digest_size=8)
    _Canonical(h).feed(value)
    return h.hexdigest()


def args_digest(args, kwargs) -> str:
    """Digest of a call's arguments as the callee receives them."""
    return digest((tuple(args), dict(kwargs or {})))


def preview(value, limit=60) -> str:
    """A short rendering of a value for reports (never compared)."""
    if _is_numpy_array(value):
        text = f"ndarray({value.dtype}, shape={tuple(value.shape)})"
    elif _kind_of(type(value)) is not None:
        text = f"<{_kind_of(type(value))}>"
    else:
        text = _ADDRESS.sub("", _safe_repr(value))
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _args_preview(args, kwargs):
    parts = [preview(a, 30) for a in args] + [f"{k}={preview(v, 30)}" for k, v in (kwargs or {}).items()]
    return preview_join(parts)


def preview_join(parts, limit=80):
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- writing

class TraceWriter:
    """Appends events to one trace file, safely from any number of processes.

    The descriptor is reopened after ``fork`` (the pid changes), and each event is
    one ``os.write`` on an ``O_APPEND`` descriptor, so lines from different
    processes never interleave within a line.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._fd = None
        self._pid = None

    def _descriptor(self):
        pid = os.getpid()
        if self._pid != pid:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._pid = pid
        return self._fd

    def write(self, event: dict):
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        os.write(self._descriptor(), line.encode())

    def close(self):
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None
        self._pid = None


_WRITERS: dict = {}
_WRITERS_LOCK = threading.Lock()


def writer_for(path) -> TraceWriter:
    """The process-wide writer for ``path`` (one descriptor per process and path)."""
    path = os.fspath(path)
    w = _WRITERS.get(path)
    if w is None:
        with _WRITERS_LOCK:
            w = _WRITERS.setdefault(path, TraceWriter(path))
    return w


def active_writer():
    """The writer named by ``RAYREACT_TRACE``, or ``None`` when tracing is off.

    Read the environment once per process (at worker start) and keep the answer:
    with tracing off the hook is a single ``is None`` test.
    """
    path = os.environ.get(ENV_VAR)
    return writer_for(path) if path else None


def load(path):
    """Events of a trace file, in file order (a missing file is an empty trace)."""
    events = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    events.append(json.loads(line))
    except FileNotFoundError:
        pass
    return events


# ---------------------------------------------------------------- call context

# The remote call this thread / asyncio task is executing: gives nested actor
# creations a stable key, and tells a wrapped method apart from a self-call.
_CURRENT = contextvars.ContextVar("rayreact_trace_current_call", default=None)
_counters_lock = threading.Lock()
_driver_counters: dict = {}


class CallScope:
    """The call being executed; collects the outcome and writes the event on exit."""

    __slots__ = ("writer", "event", "owner", "_children", "_token", "result_set")

    def __init__(self, writer, event, owner=None):
        self.writer = writer
        self.event = event
        self.owner = owner  # the actor instance for method calls (self-call detection)
        self._children = {}
        self._token = None
        self.result_set = False

    @property
    def name(self):
        e = self.event
        if e["kind"] == "task":
            return f"{e['target']}({e['args'][:8]})"
        return f"{e['target']}.{e['method']}@{e['seq']}"

    def next_child_index(self, class_name):
        with _counters_lock:
            n = self._children.get(class_name, 0)
            self._children[class_name] = n + 1
        return n

    def set_result(self, value):
        self.event["result"] = digest(value)
        self.event["result_preview"] = preview(value)
        self.result_set = True

    def set_result_items(self, item_digests):
        """Outcome of a generator: the digests of the items it yielded, in order."""
        self.event["result"] = digest(list(item_digests))
        self.event["result_preview"] = f"<{len(item_digests)} items>"
        self.result_set = True

    def set_error(self, exc_or_class_name):
        name = exc_or_class_name if isinstance(exc_or_class_name, str) else type(exc_or_class_name).__name__
        self.event.pop("result", None)
        self.event.pop("result_preview", None)
        self.event["error"] = name

    def __enter__(self):
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _CURRENT.reset(self._token)
        if exc is not None:
            self.set_error(exc)
        elif not self.result_set and "error" not in self.event:
            self.set_result(None)
        if self.writer is not None:
            self.writer.write(self.event)
        return False


def make_event(kind, target, method, seq, args, kwargs, **extra):
    event = {
        "kind": kind,
        "target": target,
        "method": method,
        "seq": seq,
        "args": args_digest(args, kwargs),
        "args_preview": _args_preview(args, kwargs),
        "pid": os.getpid(),
        "t": time.time_ns(),
    }
    event.update(extra)
    return event


def executing(writer, kind, target, method, seq, args, kwargs, owner=None, **extra) -> CallScope:
    """Context manager around one executed call::

        with trace.executing(w, "actor_call", key, "step", seq, args, kwargs) as call:
            call.set_result(method(*args, **kwargs))

    An exception leaving the block is recorded by class name and re-raised.
    Actors created inside the block get keys below this call (:func:`actor_key`).
    """
    return CallScope(writer, make_event(kind, target, method, seq, args, kwargs, **extra), owner)


def record_call(kind, target, method, seq, args, kwargs, result=None, error=None, **extra):
    """Record one executed call after the fact, if ``RAYREACT_TRACE`` is set.

    ``error`` is the exception (or its class name) the call raised; ``extra``
    fields (e.g. ``concurrent=True`` on actor_create) are written as given.
    Prefer :func:`executing` where actors may be created inside the call.
    """
    writer = active_writer()
    if writer is None:
        return
    scope = CallScope(writer, make_event(kind, target, method, seq, args, kwargs, **extra))
    if error is not None:
        scope.set_error(error)
    else:
        scope.set_result(result)
    writer.write(scope.event)


def current_call():
    """The :class:`CallScope` being executed in this context, or ``None``."""
    return _CURRENT.get()


def actor_key(class_name: str) -> str:
    """Key for an actor being created now, in the creating process.

    Call it exactly once per ``.remote()`` on an actor class (get_if_exists hits
    included), in the process that calls ``.remote()``, and hand the key to the
    actor's process.
    """
    parent = _CURRENT.get()
    if parent is not None:
        return f"{parent.name}/{class_name}#{parent.next_child_index(class_name)}"
    with _counters_lock:
        n = _driver_counters.get(class_name, 0)
        _driver_counters[class_name] = n + 1
    return f"{class_name}#{n}"


def function_target(fn) -> str:
    """The ``target`` of a task event for the user's function ``fn``."""
    return getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))


def is_user_code(module_name) -> bool:
    """Whether a function/class defined in ``module_name`` is traced.

    Internals of Ray and rayreact (queue actors, pool workers) are not: the two
    implement them differently, and only the user's calls must match.
    """
    name = module_name or ""
    return not (name == "ray" or name.startswith("ray.") or name == "rayreact" or name.startswith("rayreact."))


def record_wait(writer, partial: bool):
    """A ``wait`` returned; ``partial`` when some refs were still pending."""
    if writer is not None:
        writer.write({"kind": "wait", "partial": bool(partial), "pid": os.getpid(), "t": time.time_ns()})


def record_kill(writer, actor_key: str):
    """``kill`` (without restart) was called on the actor ``actor_key``."""
    if writer is not None:
        writer.write({"kind": "kill", "target": actor_key, "pid": os.getpid(), "t": time.time_ns()})
