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

An object travels as a *descriptor* ``(kind, payload, contained, is_error)``:
``kind`` INLINE carries the pack bytes, SEGMENT the segment path (see serialization).
"""

import pickle

DEFINE, RUN_TASK, CREATE, CALL, REPLY, EXIT, CANCEL = range(7)
REACTOR = 8        # ('start', program) | ('ack', plan): a replayed plan (see core.reactor)
DROP = 9
READY, DONE, REQUEST, RELEASE, EXITING, SPAWNED, DIED, STREAM_ITEM, DROPPED = range(10, 19)

# Nested API verbs a worker asks the driver to carry out.
(V_SUBMIT_TASK, V_CREATE_ACTOR, V_SUBMIT_CALL, V_GET, V_WAIT, V_PUT, V_KILL, V_CANCEL, V_GET_ACTOR,
 V_RESOURCES, V_CANCEL_GET, V_HANDLE, V_NAMED_LIST, V_PG, V_STREAM_NEXT, V_STREAM_DROP) = range(16)


def dumps(msg) -> bytes:
    return pickle.dumps(msg, protocol=5)


loads = pickle.loads
