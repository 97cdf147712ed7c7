"""A call's life in the driver, whatever runs it (a pool task, an actor method, an actor's creation).

::

    submit ──▶ TaskSpec ──hold_args()──▶ when_args_ready(spec, then) ──▶ then(spec): the task pool queues
                                             (object table callbacks)     it, the actor table sends it
    finish ──▶ the returns filled (by the worker's DONE, or complete_with_desc/_error) ──▶ task_finished()

The task pool (core.task_pool) and the actor table (core.actors) both build on this; it knows neither.
Everything runs under the runtime's lock.
"""

from __future__ import annotations

from .. import exceptions
from . import serialization
from .objects import READY
from .serialization import INLINE, SEGMENT


class TaskSpec:
    __slots__ = ("task_id", "code_id", "code", "name", "args_desc", "direct", "return_ids", "num_returns",
                 "resources", "retries_left", "retry_exceptions", "caller", "actor_id", "method", "unresolved",
                 "worker", "env", "cancelled", "held", "is_create", "gpu_ids", "pg", "started")

    def __init__(self):
        self.unresolved = 0
        self.worker = None
        self.env = None
        self.cancelled = False
        self.held = ()
        self.is_create = False
        self.gpu_ids = ()
        self.pg = None
        self.started = None              # when it started on its worker (monotonic), for the pipelining's timing


class Calls:
    """Arguments held and awaited, arguments shipped, returns completed.  ``table``: the object table."""

    def __init__(self, table):
        self._table = table
        self._objects = table.entries
        self._waiting_for_args = {}   # return id -> spec of a call waiting for its arguments

    def hold_args(self, spec):
        if not spec.direct and not spec.args_desc[2]:
            spec.held = ()               # (the common call: literal arguments only)
            return
        held = list(spec.direct) + list(spec.args_desc[2])
        self._table.hold(held)
        spec.held = held

    def when_args_ready(self, spec, then):
        missing = [oid for oid in spec.direct if self._objects[oid].state != READY]
        if not missing:
            then(spec)
            return
        spec.unresolved = len(set(missing))
        for oid in spec.return_ids:
            self._waiting_for_args[oid] = spec   # so cancel() finds it without a scan

        def on_ready(oid, e, spec=spec):
            spec.unresolved -= 1
            if spec.unresolved == 0:
                for rid in spec.return_ids:
                    self._waiting_for_args.pop(rid, None)
                then(spec)

        when_ready = self._table.when_ready
        for oid in set(missing):
            when_ready(oid, on_ready)

    def failed_dependency(self, spec):
        for oid in spec.direct:
            e = self._objects[oid]
            if e.is_error:
                return e
        return None

    def ship_args(self, w, spec):
        """Direct arguments' descriptors; refs nested in any argument become borrowed by ``w``."""
        table = self._table
        if spec.args_desc[2]:
            table.lend(w.index, spec.args_desc[2])
        return [table.ship(w.index, self._objects[oid]) for oid in spec.direct]

    def task_finished(self, spec):
        self._table.unhold(spec.held)
        spec.held = ()
        if spec.args_desc[0] == SEGMENT:
            self._table.discard(spec.args_desc)

    def complete_with_desc(self, spec, desc):
        for oid in spec.return_ids:
            if desc[0] == SEGMENT:
                # Errors are inline; a segment here would be shared, so copy the error inline.
                value = self._table.load(desc)
                self._table.fill_error(oid, value)
            else:
                self._table.fill(oid, desc)
        self.task_finished(spec)

    def complete_with_error(self, spec, err):
        ser = serialization.serialize(err, is_error=True)
        desc = (INLINE, ser.pack(), [], True)
        for oid in spec.return_ids:
            self._table.fill(oid, desc)
        self.task_finished(spec)

    def cancel_waiting(self, object_id):
        """Cancel a call still waiting for its arguments (it runs never: the task pool skips it)."""
        spec = self._waiting_for_args.get(object_id)
        if spec is None or spec.cancelled:
            return
        for rid in spec.return_ids:
            self._waiting_for_args.pop(rid, None)
        spec.cancelled = True
        self.complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
