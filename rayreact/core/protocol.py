"""Messages between the driver, the zygote and workers: small tuples, pickled once per message.

Driver ──▶ worker                         Worker ──▶ driver
  DEFINE      code_id, code bytes            READY       pid
  RUN_TASK    TaskMessage fields             DONE        task_id, results, worker stats
  CREATE      actor fields                   REQUEST     req_id, verb, payload   (nested API calls)
  CALL        actor method fields            RELEASE     [(object_id, count), ...]
  REPLY       req_id, payload                EXITING     reason
  EXIT        —
  CANCEL      task_id
  DROP        task_id  (give back a task sent        DROPPED     task_id  (given back unstarted)
              behind another, if not started)
                                                                                         Zygote ──▶ driver
                                             SPAWNED     worker_index, pid
                                             DIED        pid, status
  (worker) STREAM_ITEM task_id, item_id, descriptor, keep   (one yielded value of a generator task)

A message larger than a ring can carry travels as ``(LARGE, path)``: the writer puts it in a file of its
own (created exclusively, 0600, beside the session's rings), the reader reads it back and removes it.

An object travels as a *descriptor* ``(kind, payload, contained, is_error)``:
``kind`` INLINE carries the pack bytes, SEGMENT the segment path (see serialization).
"""

import os
import pickle

DEFINE, RUN_TASK, CREATE, CALL, REPLY, EXIT, CANCEL = range(7)
REACTOR = 8        # ('start', program) | ('ack', plan): a replayed plan (see core.reactor)
DROP = 9
READY, DONE, REQUEST, RELEASE, EXITING, SPAWNED, DIED, STREAM_ITEM, DROPPED = range(10, 19)
LARGE = 19         # path: the message is in that file

# Nested API verbs a worker asks the driver to carry out.
(V_SUBMIT_TASK, V_CREATE_ACTOR, V_SUBMIT_CALL, V_GET, V_WAIT, V_PUT, V_KILL, V_CANCEL, V_GET_ACTOR,
 V_RESOURCES, V_CANCEL_GET, V_HANDLE, V_NAMED_LIST, V_PG, V_STREAM_NEXT, V_STREAM_DROP) = range(16)


def dumps(msg) -> bytes:
    return pickle.dumps(msg, protocol=5)


def dumps_fitting(msg, limit, prefix) -> bytes:
    """``msg`` pickled, or, past ``limit`` bytes, the LARGE message naming a file ``prefix-m<random>``
    that holds it."""
    data = pickle.dumps(msg, protocol=5)
    if len(data) <= limit:
        return data
    path = f"{prefix}-m{os.urandom(12).hex()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return pickle.dumps((LARGE, path), protocol=5)


def loads(raw):
    msg = pickle.loads(raw)
    if msg[0] != LARGE:
        return msg
    path = msg[1]
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    finally:
        os.unlink(path)
    return pickle.loads(data)
