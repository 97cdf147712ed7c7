"""Requests from workers: what user code inside a task or actor asks of the driver (nested submit, get, put...).

::

    worker ──REQUEST (req_id, verb, payload)──▶ Runtime pump ──▶ on_request()
        V_SUBMIT_TASK / V_SUBMIT_CALL / V_CREATE_ACTOR ──▶ task pool / actor table (core.task_pool, core.actors)
        V_GET / V_WAIT ──▶ worker_get() / worker_wait(): REPLY now, or once the objects are ready (the
                           task meanwhile blocked: its CPU lent, see TaskPool.block)
        V_STREAM_NEXT / V_STREAM_DROP ──▶ streams (core.streams)
        the rest (put, kill, cancel, named actors, resources, placement groups) answered at once
    ◀── REPLY (req_id, payload)

``rt`` is the runtime (core.runtime); at construction this binds what it uses of it: ``procs``,
``object_table``, ``code``, ``task_pool``, ``actor_table``, ``streams``, ``node``, ``cancel_locked`` and
``placement_request``; a wait's timer takes ``lock`` and reads ``running``.  Everything else runs under
the runtime's lock.
"""

from __future__ import annotations

import threading

from . import handles, wire
from .objects import READY


class WorkerRequests:
    def __init__(self, rt):
        self._rt = rt
        procs = rt.procs
        self._reply = procs.reply
        self._flush_outboxes = procs.flush_outboxes
        self._table = rt.object_table
        self._objects = rt.object_table.entries
        self._code = rt.code
        tasks = rt.task_pool
        self._submit_task = tasks.submit
        self._block = tasks.block
        self._unblock = tasks.unblock
        self._actors = rt.actor_table
        self._submit_call = rt.actor_table.submit_call
        self._streams = rt.streams
        self._node = rt.node
        self._cancel = rt.cancel_locked
        self._placement_request = rt.placement_request
        self.get_waiters = {}              # (worker index, req_id) -> state of a get or wait not answered yet

    def on_request(self, w, req_id, verb, payload):
        table = self._table
        if verb == wire.V_SUBMIT_TASK:
            code_id, code, name, args_desc, direct, return_ids, num_returns, options = payload
            self._code.setdefault(code_id, code)
            table.worker_holds(w.index, return_ids)
            self._submit_task(w, code_id, name, args_desc, direct, return_ids, num_returns, options)
        elif verb == wire.V_SUBMIT_CALL:
            actor_id, method, args_desc, direct, return_ids, num_returns, task_name = payload
            table.worker_holds(w.index, return_ids)
            self._submit_call(w, actor_id, method, args_desc, direct, return_ids, num_returns, task_name)
        elif verb == wire.V_GET:
            object_ids, timeout = payload
            self._worker_get(w, req_id, object_ids)
        elif verb == wire.V_WAIT:
            object_ids, num_returns, timeout = payload
            self._worker_wait(w, req_id, object_ids, num_returns, timeout)
        elif verb == wire.V_PUT:
            oid, desc = payload
            table.reserve(oid, w.index)
            table.worker_holds(w.index, [oid])
            table.fill(oid, desc)
        elif verb == wire.V_CREATE_ACTOR:
            self._create_actor(w, req_id, payload)
        elif verb == wire.V_KILL:
            self._actors.kill(payload[0], payload[1])
            self._reply(w, req_id, None)
        elif verb == wire.V_CANCEL:
            self._cancel(payload[0], payload[1])
            self._reply(w, req_id, None)
        elif verb == wire.V_GET_ACTOR:
            name, namespace = payload
            self._reply(w, req_id, self._actors.info(name, namespace or self._rt.namespace))
        elif verb == wire.V_RESOURCES:
            self._reply(w, req_id, self._node.view(payload))
        elif verb == wire.V_NAMED_LIST:
            all_ns, ns = payload
            self._reply(w, req_id, self._actors.named_list(all_ns, ns))
        elif verb == wire.V_STREAM_NEXT:
            stream_id, index, peek = payload
            self._streams.next_for_worker(w, req_id, stream_id, index, peek)
        elif verb == wire.V_STREAM_DROP:
            self._streams.drop(payload[0])
        elif verb == wire.V_CANCEL_GET:
            state = self.get_waiters.pop((w.index, payload), None)
            if state is not None and state.get("blocked"):
                self._unblock(w)
        elif verb == wire.V_PG:
            self._reply(w, req_id, self._placement_request(*payload))

    def _create_actor(self, w, req_id, payload):
        (actor_id, code_id, code, class_name, methods, is_async, args_desc, direct, options) = payload
        self._code.setdefault(code_id, code)
        namespace = options.get("namespace") or self._rt.namespace
        err = self._actors.create_locked(actor_id, code_id, class_name, methods, is_async, args_desc, direct,
                                         options, namespace, owner=w.index)
        if err is not None:
            err = self._actors.named_if_get_if_exists(options, namespace) or err
        if err is None:
            # The creating worker holds the first handle.
            self._table.worker_holds(w.index, [handles.key_of(actor_id)])
        self._reply(w, req_id, err)

    def forget_worker(self, w):
        """``w`` died: its gets and waits are answered never."""
        for req in [k for k in self.get_waiters if k[0] == w.index]:
            self.get_waiters.pop(req, None)

    def _worker_get(self, w, req_id, object_ids):
        objects = self._objects
        table = self._table
        missing = set()
        lost = {}                 # (an entry nothing else keeps is freed as soon as it is filled)
        for oid in object_ids:
            e = objects.get(oid)
            if e is None:
                lost[oid] = table.lost(oid)
            elif e.state != READY:
                missing.add(oid)
        if not missing:
            self._reply(w, req_id, [table.ship(w.index, objects.get(oid) or lost[oid]) for oid in object_ids])
            return
        state = {"missing": missing, "blocked": False}
        key = (w.index, req_id)
        self.get_waiters[key] = state
        state["blocked"] = self._block(w)

        def on_ready(oid, e, key=key, w=w, object_ids=object_ids):
            st = self.get_waiters.get(key)
            if st is None:
                return
            st["missing"].discard(oid)
            if not st["missing"]:
                del self.get_waiters[key]
                if st["blocked"]:
                    self._unblock(w)
                self._reply(w, key[1], [table.ship(w.index, objects[o]) for o in object_ids])

        for oid in missing:
            table.when_ready(oid, on_ready)

    def _worker_wait(self, w, req_id, object_ids, num_returns, timeout):
        objects = self._objects

        def flags():
            return [(e := objects.get(o)) is not None and e.state == READY for o in object_ids]

        current = flags()
        if sum(current) >= num_returns or timeout == 0:
            self._reply(w, req_id, current)
            return
        key = (w.index, ("wait", req_id))
        state = {"done": False}
        self.get_waiters[key] = state
        blocked = self._block(w)

        def finish():
            if state["done"]:
                return
            state["done"] = True
            if blocked:
                self._unblock(w)
            self.get_waiters.pop(key, None)
            self._reply(w, req_id, flags())

        def on_ready(oid, e):
            if not state["done"] and sum(flags()) >= num_returns:
                finish()

        for oid in object_ids:
            e = objects.get(oid)
            if e is not None and e.state != READY:
                self._table.when_ready(oid, on_ready)
        if timeout is not None:
            timer = threading.Timer(timeout, lambda: self._locked(finish))
            timer.daemon = True
            timer.start()

    def _locked(self, fn):
        rt = self._rt
        with rt.lock:
            if rt.running:
                fn()
                self._flush_outboxes()
