"""Messages between the driver, the zygote and workers: a small schema per kind, read by field name.

::

    Driver ──▶ worker                                   Worker ──▶ driver
      Define    code_id code                              Ready       pid
      RunTask   task_id code_id name args arg_values      Done        task_id results ok
                return_ids num_returns env resources pg   Request     req_id verb payload   (nested API calls)
      Create    actor_id code_id class_name args          Release     counts  [(object_id, n), ...]
                arg_values max_concurrency is_async       Exiting     reason
                resources handle_info trace_key pg        StreamItem  object_id desc keep   (a generator's item)
      Call      task_id method args arg_values            Dropped     task_id  (given back unstarted)
                return_ids num_returns task_name
      Reply     req_id payload                                          Zygote ──▶ driver
      Exit      graceful                                  Spawned     worker_index pid
      Cancel    task_id                                   Died        pid status
      Drop      task_id  (give back a task sent behind another, if not started)
      Reactor   verb body  ('start', program) | ('ack', plan number): a replayed plan (core.reactor)
      Guest     spec  (to a host process: run one more worker, on a thread of its own; core.hosting)
      StopGuest worker_index  (to a host process: that guest was killed; stop the user code it runs)
                                                          Ended       code  (a guest worker ended; its host lives on)

A message is a tuple ``(kind, *fields)`` of one of the classes below; its fields are read by name.

One serialization per value: values travel as *packs* (see serialization), and an object travels as a
*descriptor* ``(INLINE | SEGMENT, pack | path, contained ids, is_error)``.  A pack big enough to be worth
it is held as a ``pickle.PickleBuffer``; :func:`encode` takes every such buffer out of band, so the
envelope carries only the message's small fields and the pack is copied once into the ring, never into
a second pickle.  :func:`decode` hands a frame's one pack back as a buffer over the frame it read (no
copy; several are copied apart, so that one kept value does not keep the others' memory), and a
received pack forwarded to another process goes out of band again.  Frames::

    b"\\x80..."                                 the pickled message (no buffers)
    OUT_OF_BAND n  len_1 .. len_n  <pickle>  <buffer 1> .. <buffer n>

A frame larger than the ring can carry travels as a :class:`Large` message naming a file of its
writer's (created exclusively, 0600, beside the session's rings); the reader reads it and removes it.
"""

from __future__ import annotations

import operator
import os
import pickle
import struct

_PickleBuffer = pickle.PickleBuffer
_dumps = pickle.dumps
_loads = pickle.loads

# Kinds (the first item of every message).
DEFINE, RUN_TASK, CREATE, CALL, REPLY, EXIT, CANCEL = range(7)
REACTOR = 8
DROP = 9
READY, DONE, REQUEST, RELEASE, EXITING, SPAWNED, DIED, STREAM_ITEM, DROPPED = range(10, 19)
LARGE = 19
GUEST, ENDED = 20, 21
STOP_GUEST = 22

# Nested API verbs a worker asks the driver to carry out (Request.verb).
(V_SUBMIT_TASK, V_CREATE_ACTOR, V_SUBMIT_CALL, V_GET, V_WAIT, V_PUT, V_KILL, V_CANCEL, V_GET_ACTOR,
 V_RESOURCES, V_CANCEL_GET, V_HANDLE, V_NAMED_LIST, V_PG, V_STREAM_NEXT, V_STREAM_DROP) = range(16)

OUT_OF_BAND = 0x4F          # first byte of a frame with out-of-band buffers ('O'; a pickle starts with 0x80)
_PICKLE_START = 0x80
_COUNT = struct.Struct("<BI")
_LENGTH = struct.Struct("<Q")

_classes: dict = {}


class Message(tuple):
    """``(kind, *fields)``; subclasses name the fields (see :func:`_schema`)."""

    __slots__ = ()
    KIND = -1
    FIELDS: tuple = ()

    def __repr__(self):
        body = ", ".join(f"{name}={value!r}" for name, value in zip(self.FIELDS, self[1:]))
        return f"{type(self).__name__}({body})"


def _schema(kind, name, fields, doc):
    """A message class: ``Name(field, ...)`` builds one (positionally, every field required)."""
    names = tuple(fields.split())
    width = len(names)

    def __new__(cls, *values):
        if len(values) != width:
            raise TypeError(f"{name} takes {width} fields ({', '.join(names)}), got {len(values)}")
        return tuple.__new__(cls, (kind,) + values)

    attrs = {"__slots__": (), "__doc__": doc, "__new__": __new__, "KIND": kind, "FIELDS": names}
    for i, field in enumerate(names, 1):
        attrs[field] = property(operator.itemgetter(i))
    cls = type(name, (Message,), attrs)
    cls.__module__ = __name__
    _classes[kind] = cls
    return cls


Define = _schema(DEFINE, "Define", "code_id code", "A function's or class's pickled code, sent before its first use.")
RunTask = _schema(RUN_TASK, "RunTask", "task_id code_id name args arg_values return_ids num_returns env resources pg",
                  "Run a task: ``args`` the packed (args, kwargs), ``arg_values`` the direct refs' descriptors.")
Create = _schema(CREATE, "Create", "actor_id code_id class_name args arg_values max_concurrency is_async resources "
                                   "handle_info trace_key pg", "Become this actor: construct it.")
Call = _schema(CALL, "Call", "task_id method args arg_values return_ids num_returns task_name",
               "Run one method of the hosted actor.")
Reply = _schema(REPLY, "Reply", "req_id payload", "The answer to a worker's Request.")
Exit = _schema(EXIT, "Exit", "graceful", "End the worker (graceful: an actor gone out of scope runs its cleanup).")
Cancel = _schema(CANCEL, "Cancel", "task_id", "ray.cancel of the running task or call.")
Drop = _schema(DROP, "Drop", "task_id", "Give back a task sent behind another, if it has not started.")
Reactor = _schema(REACTOR, "Reactor", "verb body", "('start', program) or ('ack', plan number): see core.reactor.")
Ready = _schema(READY, "Ready", "pid", "The worker is up.")
Done = _schema(DONE, "Done", "task_id results ok",
               "A call finished: ``results`` [(object id, descriptor)], ``ok`` False if it should be retried.")
Request = _schema(REQUEST, "Request", "req_id verb payload",
                  "A nested API call (req_id None: no reply wanted).")
Release = _schema(RELEASE, "Release", "counts", "Refs the worker dropped: [(object id, count)].")
Exiting = _schema(EXITING, "Exiting", "reason", "The worker is about to end on its own.")
Spawned = _schema(SPAWNED, "Spawned", "worker_index pid", "(Zygote) a worker was forked.")
Died = _schema(DIED, "Died", "pid status", "(Zygote) a worker ended; ``status`` as waitpid gives it.")
StreamItem = _schema(STREAM_ITEM, "StreamItem", "object_id desc keep", "One value a generator task yielded.")
Dropped = _schema(DROPPED, "Dropped", "task_id", "The task Drop named was given back unstarted.")
Guest = _schema(GUEST, "Guest", "spec", "(To a host process) start a guest worker of this spec on a thread of its own.")
StopGuest = _schema(STOP_GUEST, "StopGuest", "worker_index",
                    "(To a host process) that guest was killed: stop the call its user code runs, if it can be.")
Ended = _schema(ENDED, "Ended", "code", "A guest worker ended (its thread returned); its host process lives on.")
Large = _schema(LARGE, "Large", "path", "The frame is in that file (it exceeded the ring).")


def encode(msg, limit=None, prefix=None):
    """The frame for ``msg``: bytes, or a list of buffers a ring writes as one frame.  Past ``limit``
    bytes, the frame goes to a file ``prefix-m<random>`` and a :class:`Large` message names it."""
    buffers = []
    head = _dumps(tuple(msg), 5, buffer_callback=buffers.append)
    if not buffers:
        frame, size = head, len(head)
    else:
        raws = [b.raw() for b in buffers]
        lengths = [r.nbytes for r in raws]
        frame = [_COUNT.pack(OUT_OF_BAND, len(raws)), b"".join(_LENGTH.pack(n) for n in lengths), head, *raws]
        size = _COUNT.size + _LENGTH.size * len(raws) + len(head) + sum(lengths)
    if limit is None or size <= limit:
        return frame
    path = f"{prefix}-m{os.urandom(12).hex()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        if type(frame) is list:
            f.writelines(frame)
        else:
            f.write(frame)
    return _dumps((LARGE, path), 5)


def decode(raw):
    """The message in a frame (bytes).  Out-of-band packs come back as buffers over ``raw``."""
    if raw[0] == _PICKLE_START:
        t = _loads(raw)
    else:
        _, n = _COUNT.unpack_from(raw, 0)
        at = _COUNT.size + _LENGTH.size * n
        view = memoryview(raw)
        buffers = []
        end = len(raw)
        for i in range(n - 1, -1, -1):         # the buffers sit at the end, in order
            length = _LENGTH.unpack_from(raw, _COUNT.size + _LENGTH.size * i)[0]
            part = view[end - length:end]
            # One pack: a view of the frame, which is little more than the pack.  Several (a get of many
            # values, a call's many returns): each its own copy, so a value kept does not keep the others.
            buffers.append(_PickleBuffer(part if n == 1 else bytes(part)))
            end -= length
        buffers.reverse()
        t = _loads(view[at:end], buffers=buffers)
    if t[0] == LARGE:
        return decode(_read_and_remove(t[1]))
    return tuple.__new__(_classes[t[0]], t)


def _read_and_remove(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)

