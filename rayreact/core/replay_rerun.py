"""Rerunning a dead worker's calls: Ray retries a task whose worker died (``max_retries``), and an actor's
calls in flight when it died once it has restarted (``max_task_retries``), so replay does.

::

    a lent task worker dies, or the    ──▶ ReplayRun.absorb_deaths marks its link dead, with no DEAD
    worker of an actor whose calls         notice: the reactions that read its results wait for the
    may be retried (max_task_retries)      rerun's values instead
        │
        ▼
    the handover thread, while the links drain ──▶ Reruns.advance(), again and again:
        1. take the calls each such dead worker was sent and never finished (its timeline says which)
        2. find each call's inputs: the literals in its invocation frame; values the driver holds (its
           cache, what workers handed over, the dynamic table); an earlier rerun's results; a value that
           only the worker that made it still holds is asked of it with FETCH (it hands over a copy)
        3. once every input is there, submit the call dynamically under the same return ids: a task
           (``max_retries`` less one for the call the worker was running, as Ray counts: those queued
           behind it go as they were), or an actor call behind the actor's restart (each with one of its
           ``max_task_retries`` spent); an input that is an error fails it as a failed dependency would
        4. once a rerun's results are ready, send them as TOKENs to the workers whose reactions read them

Calls are taken and submitted in call order, so that a rerun reading an earlier rerun's result passes
that result's ref.  The handover fills the script's refs to these results only through the reruns
(``keys``), and every other value as before.  Reaches the run only through its public interface (see
ReplayRun's docstring) and the runtime through ``object_table``, ``submit_task``, ``resubmit_actor_call``
and ``bell``.
"""

from __future__ import annotations

from .. import exceptions
from . import ids, serialization
from .refs import ObjectRef

_MISSING = object()


class _Failed:
    """An input that is an error: the rerun fails with it, as a call whose dependency failed."""

    __slots__ = ("desc",)

    def __init__(self, desc):
        self.desc = desc


class _Call:
    """One call to run again: its position in the trace and what the DriverPath kept of it."""

    __slots__ = ("link", "index", "frame", "values", "return_ids", "refs", "charged")

    def __init__(self, link, index, frame, values):
        self.link, self.index, self.frame, self.values = link, index, frame, values
        self.return_ids = None
        self.refs = ()
        self.charged = False        # the call the worker was running: its retry is spent (Ray's count)


class Reruns:
    """The reruns of the calls of one replay run's dead lent workers and retried actors (driven by the
    handover thread)."""

    def __init__(self, run):
        self.run = run
        self.taken = set()          # names of dead links whose calls are taken
        self.waiting = []           # calls whose inputs are not all there yet, in call order
        self.forwarding = []        # submitted calls whose results workers still wait for
        self.asked = set()          # (conn, producer index) asked of a worker with FETCH
        self.made = {}              # (conn, producer index) -> a ref to the rerun result that makes it
        self.keys = set()           # (conn, index) of every rerun's results: the handover leaves them be

    def take_new_deaths(self):
        """Take the calls of every link that keeps them (``inflight``) found dead since the last look."""
        run = self.run
        found = []
        for link in run.links.values():
            if link.inflight is None or not link.dead or link.name in self.taken:
                continue
            self.taken.add(link.name)
            done = link.timeline.last_index() if link.timeline is not None else -1
            first = True
            for index, frame, values in link.inflight:
                outputs = run.op_at(index).outputs
                if index <= done or (outputs and all((cid, index) in run.cache for cid in outputs)):
                    continue
                call = _Call(link, index, frame, values)
                # A task: the calls queued behind the one it ran go to another worker as they are, as in Ray.
                # An actor: each call it was sent is retried, and each retry counts.
                call.charged, first = first or not link.is_task, False
                found.append(call)
        for call in sorted(found, key=lambda c: c.index):
            op = run.op_at(call.index)
            call.return_ids = [run.given.get((call.index, ret)) or ids.new_id() for ret in range(op.nret)]
            for cid, oid in zip(op.outputs, call.return_ids):
                # A ref: the entry lives until every rerun reading it is submitted (dropped in give_up).
                self.made[(cid, call.index)] = ObjectRef(oid)
                self.keys.add((cid, call.index))
            self.waiting.append(call)
        self.waiting.sort(key=lambda c: c.index)
        return bool(found)

    @property
    def busy(self):
        """Calls still wait for an input (the handover must not end before they are submitted)."""
        return bool(self.waiting)

    def advance(self):
        """Submit what can be, forward what is ready; whether anything happened."""
        progressed = self.take_new_deaths()
        while self.waiting:
            call = self.waiting[0]
            args = self._inputs(call)
            if args is _MISSING:
                break
            self.waiting.pop(0)
            self._submit(call, args)
            progressed = True
        return self._forward() or progressed

    def give_up(self):
        """The run has ended: fail the calls still waiting for an input that can no longer come, and let go
        of the reruns' results (the script's own refs keep what it still names)."""
        for call in self.waiting:
            err = exceptions.RaySystemError("rayreact lost an input of a rerun of a dead worker's call")
            self._fail(call, (serialization.INLINE, serialization.serialize(err, is_error=True).pack(), [], True))
        self.waiting = []
        self.made = {}

    def any_ready(self):
        table = self.run.rt.object_table
        return any(table.is_ready(oid) for call in self.forwarding for oid in call.return_ids)

    # ------------------------------------------------------------------ inputs
    def _inputs(self, call):
        """The call's arguments as values (or refs to earlier reruns' results), a _Failed if an input is
        an error, or _MISSING while some input is still to come."""
        run = self.run
        op = run.op_at(call.index)
        literals = iter(self._literals(call.frame))
        values, missing = [], False
        for spec, held in zip(op.specs, call.values):
            if spec is None:
                values.append(next(literals))
                continue
            conn, distance, ret, const = spec
            key = const[0] if const is not None else (conn, call.index - distance)
            value = self._input(key, ret, const, held)
            if value is _MISSING:
                missing = True
            elif type(value) is _Failed:
                return value
            values.append(value)
        return _MISSING if missing else values

    def _input(self, key, ret, const, held):
        """``held``: what the DriverPath kept of the argument, the script's ref (a value the driver made)
        or its id (a value a worker made; the ref would have kept it in the driver)."""
        run = self.run
        ref = self.made.get(key)
        if ref is not None:
            return ref
        tok = run.cache.get(key)
        if tok is not None:
            if tok.flags & run.ext.F_ERROR:
                return _Failed((serialization.INLINE, bytes(tok.view()), [], True))
            return tok.value()
        desc = run.handed.get(key)
        if desc is not None:
            if desc[3]:
                return _Failed(desc)
            pack = desc[1] if desc[0] == serialization.INLINE else serialization.map_segment(desc[1])
            return serialization.loads_pack(pack)
        table = run.rt.object_table
        # Moved to the dynamic table (kept past the plan's buffering), or a constant it holds.
        for oid in (held._id if isinstance(held, ObjectRef) else held,
                    const[1] if const is not None else run.given.get((key[1], ret))):
            if oid is not None and table.is_ready(oid):
                return ObjectRef(oid)
        writer = run.writer_of.get(key[0])
        link = run.links.get(writer)
        if link is not None and not link.dead:
            if key not in self.asked:
                self.asked.add(key)
                run.fetch(link, key)
            return _MISSING
        payload = run.death_payloads.get(writer) or serialization.serialize(exceptions.RaySystemError(
            f"rayreact lost a replayed value ({key}) that a rerun of a dead worker's call needed"),
            is_error=True).pack()
        return _Failed((serialization.INLINE, payload, [], True))

    def _literals(self, frame):
        ext = self.run.ext
        how = ext.INVOKE_HEADER.unpack_from(frame, 0)[2]
        # The invocation holds the literals as they were at the call: the snapshot Ray's retry would send.
        return ext.invoke_literals(how, memoryview(frame)[ext.INVOKE_HEADER.size:])[0]

    # ------------------------------------------------------------------ submitting and forwarding
    def _submit(self, call, values):
        run = self.run
        rt = run.rt
        op = run.op_at(call.index)
        if type(values) is _Failed:
            self._fail(call, values.desc)
            return
        if call.index in run.cancelled_tasks:
            err = exceptions.TaskCancelledError()
            self._fail(call, (serialization.INLINE, serialization.serialize(err, is_error=True).pack(), [], True))
            return
        args, kwargs = tuple(values[:op.nargs]), dict(zip(op.kwnames, values[op.nargs:]))
        if not call.link.is_task:
            # Queued behind the actor's restart (or failed as its death, if it may not restart), as Ray retries.
            retries = call.link.actor.max_task_retries
            rt.resubmit_actor_call(op.actor, op.method, args, kwargs, op.nret, call.return_ids,
                                   retries - 1 if retries > 0 else retries)
            call.refs = [ObjectRef(oid) for oid in call.return_ids]
            self.forwarding.append(call)
            return
        _, function, options = run.task_of[run.plan.reactions[op.position].target]
        if not call.charged:
            call.refs = rt.submit_task(function, args, kwargs, options, return_ids=call.return_ids)
            self.forwarding.append(call)
            return
        retries = options.get("max_retries")
        retries = 3 if retries is None else retries
        if retries == 0:
            err = exceptions.WorkerCrashedError(
                f"The worker died unexpectedly while executing this task ({function._function_name}).")
            self._fail(call, (serialization.INLINE, serialization.serialize(err, is_error=True).pack(), [], True))
            return
        again = dict(options, max_retries=retries - 1 if retries > 0 else retries)
        call.refs = rt.submit_task(function, args, kwargs, again, return_ids=call.return_ids)
        self.forwarding.append(call)

    def _fail(self, call, desc):
        rt = self.run.rt
        call.refs = [ObjectRef(oid) for oid in call.return_ids]    # first: an entry nobody names is freed
        # (stop() made the script's refs pending; one no longer there is made again)
        rt.object_table.fill_unready(call.return_ids, desc)
        rt.bell.ring()
        self.forwarding.append(call)

    def _forward(self):
        """Send each finished rerun's results to the live workers whose reactions read them."""
        run = self.run
        table = run.rt.object_table
        conns = run.plan.connections
        progressed = False
        for call in list(self.forwarding):
            entries = [table.get(oid) for oid in call.return_ids]
            if not all(e is not None and table.is_ready(oid) for e, oid in zip(entries, call.return_ids)):
                continue
            self.forwarding.remove(call)
            progressed = True
            op = run.op_at(call.index)
            for cid, entry in zip(op.outputs, entries):
                for reader in dict.fromkeys(u.reactor for u in conns[cid].uses):
                    link = run.links.get(reader)
                    if link is not None and not link.dead and not link.stopped:
                        run.send_desc(link, cid, call.index, entry.desc)
            call.refs = ()
        return progressed
