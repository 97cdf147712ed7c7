"""The caller's half of a submission: argument packing and the request a worker sends for nested calls.

The same packing serves the driver and workers: top-level ObjectRef arguments
become ``_ArgRef`` placeholders (resolved before the call, as Ray does); refs
nested in containers stay refs.  The packed arguments are one serialized value.
"""

from __future__ import annotations

import hashlib

from .. import exceptions
from .refs import ObjectRef
from . import handles, ids, wire, serialization
from .serialization import INLINE, SEGMENT
from .spilling import spilling
from .worker import _ArgRef


def pack_args(args, kwargs, session):
    """Return (descriptor of the packed (args, kwargs), direct ref ids)."""
    direct = []
    if args:
        packed_args = []
        for a in args:
            if type(a) is ObjectRef:
                direct.append(a._id)
                a = _ArgRef(len(direct) - 1)
            packed_args.append(a)
        args = tuple(packed_args)
    if kwargs:
        packed_kwargs = {}
        for k, v in kwargs.items():
            if type(v) is ObjectRef:
                direct.append(v._id)
                v = _ArgRef(len(direct) - 1)
            packed_kwargs[k] = v
        kwargs = packed_kwargs
    ser = serialization.inline_plain((args, kwargs))
    if ser is not None and type(ser) is not serialization.Serialized:
        return (INLINE, ser, [], False), direct
    if ser is None:
        try:
            ser = serialization.serialize((args, kwargs))
        except serialization.SerializationError as exc:
            raise TypeError(f"Could not serialize the arguments: {exc}") from exc.__cause__
    if ser.size <= serialization.INLINE_LIMIT:
        return (INLINE, ser.inline(), ser.contained, False), direct
    path = spilling.write(ser, f"rr-{session}-args-{ids.new_id().hex()}")
    return (SEGMENT, path, ser.contained, False), direct


def task_resources(options, default_cpus):
    res = {}
    cpus = options.get("num_cpus")
    res["CPU"] = default_cpus if cpus is None else cpus
    gpus = options.get("num_gpus")
    if gpus:
        res["GPU"] = gpus
    if options.get("memory"):
        res["memory"] = options["memory"]
    for k, v in (options.get("resources") or {}).items():
        res[k] = v
    return {k: v for k, v in res.items() if v}


STREAMING = -1   # num_returns="streaming": .remote() gives an ObjectRefGenerator
DYNAMIC = -2     # num_returns="dynamic": one ref to a DynamicObjectRefGenerator


def num_returns_of(options, default=1):
    n = options.get("num_returns", default)
    return normalize_num_returns(default if n is None else n)


def normalize_num_returns(n):
    if n == "streaming":
        return STREAMING
    if n == "dynamic":
        return DYNAMIC
    return n


def return_count(num_returns):
    """How many object ids a call reserves (a generator reserves one: its end-of-stream marker)."""
    return num_returns if num_returns >= 0 else 1


def item_id(stream_id: bytes, index: int) -> bytes:
    """The id of the ``index``-th value yielded by a generator task (ids end in a counter < 2**96)."""
    return stream_id[:24] + (index + 1).to_bytes(4, "little")


def code_of(obj):
    """(code id, pickled code) of a RemoteFunction or ActorClass, pickled on first use and kept on it.

    The id is a digest of the pickle: the same function made remote twice (``ray.remote(f)`` inside a loop
    or a test) is one piece of code, as in Ray, which exports functions by the hash of their pickle.  Its
    workers define it once, and the reactor sees one call site where a script repeats itself."""
    code_id = obj._code_id
    if code_id is None:
        own = vars(obj)              # (an ActorClass forwards unknown attributes to the user's class)
        code = serialization.dumps_code(own["_function"] if "_function" in own else own["_cls"])
        code_id = hashlib.blake2b(code, digest_size=16).digest()
        obj._code_pickle = code
        obj._code_id = code_id
    return code_id, obj._code_pickle


def code_id_of(obj) -> bytes:
    return obj._code_id if obj._code_id is not None else code_of(obj)[0]


def captured_options(worker, options):
    """Inside a task placed with capture_child_tasks, children go to the same group unless told otherwise."""
    pg = worker.current_pg
    if pg is None or not pg[1] or options.get("scheduling_strategy") is not None \
            or options.get("placement_group") is not None:
        return options
    return {**options, "placement_group": CapturedGroup(bytes.fromhex(pg[0])), "placement_group_bundle_index": -1,
            "placement_group_capture_child_tasks": True}


class CapturedGroup:
    """The placement group a child task inherits, as the driver's scheduler reads an option's group (``.id``)."""

    __slots__ = ("id",)

    def __init__(self, group_id):
        self.id = group_id

    def __reduce__(self):
        return (CapturedGroup, (self.id,))


_code_sent = set()     # code ids this worker process has sent the driver (which keeps code for the session)


def _code_once(code_id, obj):
    """The pickled code of ``obj`` (a RemoteFunction or ActorClass) the first time this process submits
    ``code_id``, None after: the driver has it (a worker's messages arrive in order)."""
    if code_id in _code_sent:
        return None
    _code_sent.add(code_id)
    return code_of(obj)[1]


def submit_task_from_worker(worker, remote_function, args, kwargs, options):
    options = captured_options(worker, options)
    num_returns = num_returns_of(options, remote_function._default_num_returns)
    args_desc, direct = pack_args(args, kwargs, worker.session)
    code_id = code_id_of(remote_function)
    code = _code_once(code_id, remote_function)
    return_ids = [ids.new_id() for _ in range(return_count(num_returns))]
    worker.post(wire.V_SUBMIT_TASK, (code_id, code, remote_function._function_name, args_desc, direct,
                                          return_ids, num_returns, dict(options)))
    refs = [ObjectRef(oid) for oid in return_ids]
    worker.received(return_ids)
    return as_returns(refs, num_returns)


def create_actor_from_worker(worker, actor_class, args, kwargs, options):
    options = captured_options(worker, options)
    name = options.get("name")
    if worker.tracer is not None:
        options = {**options, "_trace_key": worker.tracer.actor_key_for(actor_class._cls.__name__)}
    if name and options.get("get_if_exists"):
        found = worker.get_actor_info(name, options.get("namespace"))
        if found is not None:
            return handles.new_handle(*found, weak=True)
    args_desc, direct = pack_args(args, kwargs, worker.session)
    code_id = code_id_of(actor_class)
    code = _code_once(code_id, actor_class)
    actor_id = ids.actor_id()
    reply = worker.request(wire.V_CREATE_ACTOR, (actor_id, code_id, code, actor_class._cls.__name__,
                                                      actor_class._methods, actor_class._is_async, args_desc,
                                                      direct, dict(options)))
    if isinstance(reply, tuple):
        return handles.new_handle(*reply, weak=True)   # get_if_exists: another caller created it since we looked
    if reply is not None:
        raise reply
    return handles.new_handle(actor_id, actor_class._cls.__name__, actor_class._methods, original=True)


def submit_call_from_worker(worker, handle, info, args, kwargs, num_returns):
    num_returns = normalize_num_returns(num_returns)
    args_desc, direct = pack_args(args, kwargs, worker.session)
    return_ids = [ids.new_id() for _ in range(return_count(num_returns))]
    worker.post(wire.V_SUBMIT_CALL, (handle._actor_id, info.name, args_desc, direct, return_ids,
                                          num_returns, info.task_name))
    refs = [ObjectRef(oid) for oid in return_ids]
    worker.received(return_ids)
    return as_returns(refs, num_returns)


def as_returns(refs, num_returns):
    if num_returns == STREAMING:
        from .refs import ObjectRefGenerator
        return ObjectRefGenerator(refs[0])
    if num_returns == 1 or num_returns == DYNAMIC:
        return refs[0]
    if num_returns == 0:
        return None
    return refs


def raisable(err):
    """What ``get`` raises for a stored error value."""
    if isinstance(err, exceptions.RayTaskError) and not isinstance(err.cause, exceptions.RayError):
        return err.as_instanceof_cause()
    return err
