"""Replay: the driver's side of the reactor layer (record -> infer -> replay -> deopt).

::

             every driver API call (the Reactor is context.current, in front of the Runtime it holds)
                                   │
     RECORDING ── feed record.Recorder; after a get/wait (or BARRIER_FREE calls without one), now and
         │        then run infer.infer; REPEATS full periods (2 unless RAYREACT_REPEATS says) suffice
         │ a plan without blockers, and the next call sits at plan.switch
         ▼
     REPLAYING ── ReplayRun: guard check + one frame per call on pre-wired rings;
         │        workers run their static schedule (reactor.pyx); values flow
         │        worker to worker; get reads the driver's rings directly
         │ any deviation (guard, kill, new actor, a reaction raising, a worker
         │ dying, a ref held past the plan's buffering, another thread)
         ▼
     DYNAMIC  ── every value the script can still reach becomes a pending object
                 of the Runtime at once; a handover thread drains what is in
                 flight and fills them (the deviating call never waits for a
                 reaction); after a cool-down, RECORDING again (a new phase may
                 settle; a new run starts once the last handover is done)

Calls made inside workers never come through here: they stay dynamic.

Task call sites are replayed on pool workers lent to the run (one per
``task:k`` reactor), anywhere in the graph: their arguments may be literals,
puts, values made before the loop or other reactions' results, and their
results may go to ``get``/``wait`` and to other reactions.  The driver keeps
each call's invocation until it has run, so when a lent worker dies the calls
it had not finished run again dynamically under the refs the script holds, as
Ray retries them (``max_retries``), with inputs only a worker held fetched from
it, and their results sent on to the reactions that wait for them
(core.replay_rerun).

A loop in completion order (wait for whichever result is ready, pass it on, give its actor the next call:
an asynchronous parameter server, Ape-X) replays from a plan with a *pool*: its pooled position runs on
whichever member the script calls, each member's result goes to the driver, and a ref that reaches back a
varying number of periods is *relayed*: the driver, which holds the result (the script waited on it),
writes it into the reading call's inbox just before the invocation.  A ref to a result not here yet ends
the run (the call would wait for it, and the script must not).

A loop whose blocks of calls come in any order (Ape-X: the learner's step, an explorer's chunk, a look at
the weights, by whatever finished) replays from a plan of *blocks* (core.infer_blocks): one period holds
each block once, a call that begins another block than the driver's position skips to it, and every ref
read across blocks is relayed from whatever value the driver holds (``plan.ANY_POSITION``; a result of the
plan's own not here yet is waited for ``RELAY_WAIT_S`` at most, then the run ends).  Such a loop
shows itself when a run ends, at a period's beginning, on a call the script made before the loop began: a
plan of one block's run then waits up to ``BLOCK_PATIENCE`` calls for the plan of the blocks (once in vain,
and the script is taken to change phase now and then: no plan waits again).

Refs nested in a call's arguments are passed as refs, as Ray passes them: the
driver makes each one's value reachable through the dynamic table and lends it
to the callee's worker (core.replay_nested).  So are refs nested in a put's
value: the put is an entry of the dynamic table too (it keeps them), and each
call that reads it has them lent to its worker.

Declined (the pattern runs dynamically, ``explain()`` says why): tasks with
options beyond ``num_returns``,
``max_retries`` and ``name``, a put nesting refs whose own ref is passed nested,
threaded or async actors whose calls may be retried, an actor whose calls may be retried reading its own
results (they would die with it), generator calls, values the plan starts from
that nest refs, loops of calls of 100 ms or more.  An actor that may restart is
replayed: its death deoptimizes like any other and the dynamic runtime restarts
it; the calls it had not finished fail with ``RayActorError`` (as in Ray with no
task retries) or, with ``max_task_retries``, run again behind the restart
(core.replay_rerun).

Lock order: ``Reactor.lock`` may be held while taking ``Runtime.lock`` (which is
also the object table's lock, see core.objects), never the reverse; hooks that
run under the runtime's lock (a worker died) only set flags and ring the replay
doorbell.  Replay reaches the runtime only through its public interface: the
object table (``rt.object_table``) for entries, and ``lock``, ``wait_until``,
``send_to_worker``, ``session_prefix``, ``pool_target`` for the rest.

What replay keeps per value (see ``infer``'s contract): every ref it returns
remembers its producer (trace index, return); a token (the serialized value)
is never overwritten, only dropped once the script can no longer name it.
Refs still alive ``R`` periods after they were made are moved into the dynamic
object table if the driver holds their value, or force a deopt (the value
then comes back from the worker that made it).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import os
import threading
import time

from .. import exceptions
from .refs import ObjectRef, ObjectRefGenerator
from . import admission, channel, ids, refcount, serialization, submission
from .infer import infer, infer_pooled
from .infer_blocks import infer_blocks
from .infer_pools import find_pooled
from .plan import ANY_POSITION, key_text
from .record import ACTOR_METHOD, TASK, ActorInfo, Recorder, Submit, ref_slots
from .replay_handover import Handover
from .replay_nested import NestedRefs, nested_ref_ids, take_descriptor
from .replay_ops import DEOPT, TASK_CALLER, Link, Refused, TaskSlot
from .replay_reads import OffPlanReads
from .replay_wiring import Wiring
from .runtime import READY
from .runtime_api import RuntimeFront

logger = logging.getLogger("rayreact")

RECORDING, REPLAYING, DYNAMIC, OFF = "RECORDING", "REPLAYING", "DYNAMIC", "OFF"
LAST_SNAPSHOT = None                   # the last session's snapshot: explain() still answers after shutdown

REPEATS = int(os.environ.get("RAYREACT_REPEATS", "2"))   # full periods seen before replay engages
WINDOW = 4096                          # events infer looks at
MAX_TRACE = 8192                       # a recording that found nothing this long gives up (for a cool-down)
COOLDOWN_FIRST = 64                    # dynamic events before recording again, doubled after each refusal
MAX_REPEATS = 48                       # periods a flapping script must repeat before it is replayed again
COOLDOWN_MAX = 1 << 16
# A loop with no get or wait (refs passed from call to call, one get at the end) is inferred after this
# many events without a barrier: infer prefers to cut a period at a barrier, but needs none.
BARRIER_FREE = 32
# How long a relay waits for a result not here yet before the run leaves (what it waits for may come only from
# what the script does next).
RELAY_WAIT_S = 0.1
# After a run ended on a call that begins something else than the plan's next period (the script took another
# block of calls), a plan of one block waits this many calls for a plan of the blocks in any order.
BLOCK_PATIENCE = 96



def _pure_fan_out(plan):
    """Whether no call of the plan's period reads a value the period makes (dynamic mode pipelines such
    calls as well as replay would, and a stretch of them says nothing about the loop around it)."""
    return not any(c.uses for c in plan.connections if c.source == "period")


class Reactor(RuntimeFront):
    """The reactor layer in front of one driver runtime (``rt``, which it holds): with replay on, what
    ``context.current`` is.  Its state machine and everything explain() reports."""

    def __init__(self, rt):
        from . import reactor as _reactor_ext          # the Cython scheduler (also the frame codec)
        super().__init__(rt)
        self.ext = _reactor_ext
        self.rt = rt
        self.lock = threading.RLock()
        self.state = RECORDING
        self.index = 0                   # absolute event index of the next driver API call
        self.api_events = 0              # every driver API event so far (explain's share replayed)
        self.recorder = None
        self.pending = None              # a replayable plan waiting for its switch point
        self.pending_laid = None         # a plan of blocks: (the laid-out trace it counts in, the call it awaits)
        self.run = None
        self.runs = []                   # ended runs (for explain/timeline): summaries, or a run still handing over
        self.draining = []               # runs whose handover thread has not finished
        self.fallbacks = []              # (when, reason, periods replayed)
        self.refusals = collections.OrderedDict()   # reason -> count
        self.completion_order = None     # set per recording (_start_recording)
        # Methods whose run ended because the script called another actor of the class the plan expected
        # there: the script picks their actors in completion order, however regular the rotation looked.
        self.rotation_broke = frozenset()
        # A run ended on a call that begins another block of calls than the plan's period: the script's blocks
        # may come in any order, and a plan of them is preferred to one of the latest block's run.
        self.calls_interleave = False
        self.block_patience = BLOCK_PATIENCE
        self.cooldown = 0
        self.backoff = COOLDOWN_FIRST
        self.repeats = REPEATS           # full periods a plan needs before replay; grows while runs end early
        self.next_attempt = 0
        self.last_barrier = 0            # index after the latest get/wait
        self.plans_found = 0
        self.started = time.monotonic()
        self.bell = None
        self.run_counter = 0
        self.tasks = {}                  # plan target key -> (guard target, RemoteFunction, options)
        rt.attach_reactor(self)
        self._start_recording()

    @property
    def reactor(self):
        return self

    # ================================================================== state changes
    def _start_recording(self):
        rt = self.rt
        actors = {}
        with rt.lock:
            for aid, a in rt.actors.items():
                if a.state != "DEAD":
                    actors[aid] = ActorInfo(a.class_name, a.max_concurrency or 1, bool(getattr(a, "is_async", False)),
                                            a.max_task_retries)
        internal = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),)
        self.recorder = Recorder(ObjectRef, ref_id=_ref_id, internal=internal, actors=actors, first_index=self.index)
        self.tasks = {}                  # a plan only names tasks of the trace it came from
        self.pending = None
        self.pending_laid = None
        self.next_attempt = 8
        self.last_barrier = self.index
        self.completion_order = None     # what infer_pools saw in this recording, if its calls follow no period
        self.state = RECORDING

    def _go_dynamic(self, cooldown):
        self.recorder = None
        self.pending = None
        self.pending_laid = None
        self.cooldown = cooldown
        self.state = DYNAMIC

    def _refuse(self, reason):
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        self.calls_interleave = False
        self._go_dynamic(self.backoff)
        self.backoff = min(self.backoff * 2, COOLDOWN_MAX)

    def _no_pattern(self):
        """A long recording found nothing: record again only after at least as long a dynamic stretch,
        so a script without a fixed pattern spends most of its calls unrecorded."""
        self.backoff = max(self.backoff, MAX_TRACE)
        self._refuse(self.completion_order or f"no repeating pattern in {MAX_TRACE} calls")

    def _enter(self):
        """Called under ``self.lock`` at the start of every API event: True if this event replays."""
        self.api_events += 1
        state = self.state
        if state is REPLAYING:
            run = self.run
            if run.reason is not None:
                self.deopt(run.reason)
                return False
            if threading.get_ident() != run.owner:
                self.deopt("an API call from another thread")
                return False
            return True
        if state is RECORDING:
            plan = self.pending
            if plan is not None and plan.blocks:
                # A loop of blocks begins at the next call, whatever block it begins.
                if self._plan_index(plan) == self.pending_laid[1] and not self.draining:
                    return self._switch(plan)
                return False
            # The workers of a run still handing over are busy with it: the next period switches instead.
            if plan is not None and plan.position(self._plan_index(plan)) == plan.switch and not self.draining:
                return self._switch(plan)
            return False
        if state is DYNAMIC:
            self.index += 1
            self.cooldown -= 1
            if self.cooldown <= 0:
                self._start_recording()
        return False

    def _plan_index(self, plan):
        """The index of the next event in the plan's numbering (calls and puts only if it left reads out)."""
        return self.index - self.recorder.reads if plan.reads_excluded else self.index

    def _switch(self, plan):
        self.pending = None
        self.run_counter += 1
        if plan.blocks:
            (trace, _), first = self.pending_laid, plan.end
        else:
            trace = self.recorder.trace.without_reads() if plan.reads_excluded else self.recorder.trace
            first = self._plan_index(plan)
        self.pending_laid = None
        try:
            run = ReplayRun(self, plan, trace, first, self.run_counter)
        except Refused as exc:
            self._refuse(str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - a bug here must cost speed, never the script
            logger.exception("rayreact could not start a replay; continuing in dynamic mode")
            self._refuse(f"internal error while starting the plan: {exc!r}")
            return False
        self.run = run
        self.recorder = None
        self.state = REPLAYING
        return True

    def deopt(self, reason):
        """Leave replay: drain, hand values over, continue dynamically (recording again later)."""
        run = self.run
        if run is None:
            return
        try:
            self._leave_run(reason)
        finally:
            self.fallbacks.append((time.monotonic() - self.started, reason, run.periods))
            # Scripts change phase (a new actor count, evaluation after training): record the new pattern at
            # once.  What a script that flaps costs is the switch and the drain, not recording, so a run that
            # ended early makes the next plan wait for more repeats instead of pausing the recording.
            if run.periods >= 2 * self.repeats:
                self.repeats = REPEATS            # a run that outlasted its warm-up: a phase change, not flapping
            else:
                self.repeats = min(self.repeats * 2, MAX_REPEATS)
            self._start_recording()

    def _leave_run(self, reason):
        """Stop the live run: its values hand over on its own thread (``draining`` until then)."""
        run = self.run
        try:
            self.draining.append(run)
            run.stop(reason)
        finally:
            self.run = None
            self.index = run.idx
            self.runs.append(run)

    def handed_over(self, run):
        """From a run's handover thread, when it has finished: keep only its summary."""
        run_summary = run.summary()
        run_summary["handing_over"] = False     # done (the thread calling this is still alive)
        for i, r in enumerate(self.runs):      # in place: the script's thread may be appending
            if r is run:
                self.runs[i] = run_summary
        try:
            self.draining.remove(run)
        except ValueError:
            pass

    def reset(self):
        """Leave any replay and record afresh now (tests and phase changes the script announces)."""
        with self.lock:
            if self.run is not None:
                self.deopt("reset")
            self.backoff = COOLDOWN_FIRST
            self.repeats = REPEATS
            self.rotation_broke = frozenset()
            self.calls_interleave = False
            self.block_patience = BLOCK_PATIENCE
            self._start_recording()

    # ================================================================== recording
    def _recorded(self, event_kind):
        """After an event was recorded: guard-check a pending plan; after gets/waits, try infer."""
        rec = self.recorder
        self.index = rec.next_index
        if event_kind in ("get", "wait"):
            self.last_barrier = self.index
        plan = self.pending
        if plan is not None and plan.blocks:
            if event_kind not in ("get", "wait"):
                self.pending = self.pending_laid = None     # (a call it did not begin with: look again)
        elif plan is not None:
            if not plan.reads_excluded:
                if not plan.guard.check(rec.trace.events[-1]):
                    self.pending = None
            elif event_kind not in ("get", "wait") and not plan.guard.check(rec.trace.without_reads().events[-1]):
                self.pending = None      # (renumbered without the reads, as the plan was found)
        if self.pending is None and event_kind in ("get", "wait"):
            self._maybe_infer()
        elif self.pending is None and rec.next_index - self.last_barrier >= BARRIER_FREE:
            self._maybe_infer(barrier_free=True)
        elif len(rec.trace.events) > MAX_TRACE:
            self._no_pattern()

    def _maybe_infer(self, barrier_free=False):
        """``barrier_free``: no get or wait for a while.  A period found there is taken if values flow from
        call to call in it (results the script keeps and reads later go to the driver, and a ref kept past
        the plan's buffering moves to the dynamic table); a pure fan-out, whose calls read nothing the period
        makes, is left to dynamic mode, which pipelines it as well and has no switch to pay."""
        rec = self.recorder
        n = len(rec.trace.events)
        if n < self.next_attempt:
            return
        # Geometric spacing: infer's work stays a small constant per recorded event.
        self.next_attempt = n + max(8, n // 2)
        found_in = rec.trace
        plan = infer(found_in, repeats=self.repeats, window=WINDOW, task_slots=self._task_slots())
        calls_repeat = False
        if plan is None and rec.reads:
            # Reads that follow no fixed pattern (a wait for whichever result is ready first, a look every
            # few iterations) hide the calls' pattern: look for it among the calls alone.
            found_in = rec.trace.without_reads()
            shortest = 1
            for _ in range(4):
                plan = infer(found_in, repeats=self.repeats, window=WINDOW, task_slots=self._task_slots(),
                             min_period=shortest)
                if (plan is None or not _pure_fan_out(plan)
                        or rec.trace.reads_among_calls(max(found_in.first_index, plan.start - plan.period))):
                    break
                # A fan-out of calls that read nothing from one another, found within one stretch between two
                # reads (identical calls over one put), ends with the stretch: a plan of it would deviate at
                # once.  The loop's period holds the stretch: look for one at least that long.
                shortest, plan = max(plan.period + 1, plan.end - plan.start), None
            calls_repeat = plan is not None
            if plan is not None and rec.trace.reads_repeat(plan.start, plan.period, plan.repeats):
                plan = None                # the reads follow the calls' period: wait for a plan that has them
            if plan is not None:
                plan = dataclasses.replace(plan, reads_excluded=True)
        if rec.reads and (plan is None and not calls_repeat or plan is not None and len(plan.reactors) > 2):
            # Calls with no fixed period may still repeat in completion order (whichever actor finished is
            # called next, given whichever result the script waited for): a plan whose pooled position runs
            # on the member called, and whose refs that reach back a varying number of periods the driver
            # relays.  Where infer found a fixed period too, the pooled pattern is taken if it spans more of
            # the calls: its region shows the order varying, and the fixed plan's tail only happened to
            # rotate.  (An uneven fixed schedule over actors of one class looks the same for a while: a
            # pooled plan runs it correctly too.)
            pooled, pooled_in = self._pooled_plan(rec, fixed=plan)
            if pooled is not None:
                plan, found_in = pooled, pooled_in
        laid = None
        if rec.reads:
            # Blocks of calls that come in any order (Ape-X: the learner's step, an explorer's chunk, a look at
            # the weights): taken where their region spans more of the calls than the plan found above, whose
            # region is then only the latest run of one block.
            blocks, laid = self._block_plan(rec, plan)
            if blocks is not None:
                plan, found_in = blocks, laid[0]
        if plan is None:
            if n > MAX_TRACE:
                self._no_pattern()
            return
        if self.calls_interleave:
            if not plan.blocks and n - rec.reads < self.block_patience:
                return          # (the latest run of one block: wait for a plan of the blocks)
            # Waited in vain: the script changes phase now and then, and is not kept waiting again.
            self.block_patience = BLOCK_PATIENCE if plan.blocks else 0
            self.calls_interleave = False
        if barrier_free and _pure_fan_out(plan):
            return          # a pure fan-out: nothing flows between its calls, and dynamic mode pipelines it
        if admission.cost_unclear(plan, found_in):
            return          # judged by its first period alone, which was slow: wait for another
        self.plans_found += 1
        refusals = admission.refusals(plan, found_in)
        if refusals:
            self._refuse("; ".join(refusals))
            return
        self.pending = plan
        self.pending_laid = laid if plan.blocks else None

    def _pooled_plan(self, rec, fixed):
        """(the plan of a loop in completion order over the calls, the trace it was found in), or
        (None, None): none, one whose plan cannot run (``completion_order`` says why), or one spanning no
        more calls than the ``fixed`` plan infer found."""
        calls = rec.trace.without_reads()
        with self.rt.lock:
            dead = frozenset(aid for aid, a in self.rt.actors.items() if a.state == "DEAD")
        pattern = find_pooled(calls, repeats=self.repeats, rotations=self.rotation_broke, exclude=dead)
        if pattern is None:
            if fixed is None:
                described = find_pooled(rec.trace, repeats=self.repeats)
                self.completion_order = None if described is None else described.reason()
            return None, None
        if fixed is not None:
            fixed_calls = (fixed.end - fixed.start if fixed.reads_excluded
                           else rec.trace.calls_between(fixed.start, fixed.end))
            broke = any(p.method in self.rotation_broke for p in pattern.pools)
            if pattern.end - pattern.start < fixed_calls + (0 if broke else 1):
                return None, None
        plan = dataclasses.replace(infer_pooled(calls, pattern, task_slots=self._task_slots()),
                                   reads_excluded=True)
        refused = admission.refusals(plan, calls)
        if refused:
            self.completion_order = pattern.reason(refused)
            return None, None               # (a fixed plan, if there is one, may still run)
        return plan, calls

    def _block_plan(self, rec, plan):
        """(the plan of a loop of blocks in any order, (its laid-out trace, the index of the call it begins
        with)), or (None, None): none, none that can run, or ``plan`` (found above) is kept."""
        calls = rec.trace.without_reads()
        with self.rt.lock:
            dead = frozenset(aid for aid, a in self.rt.actors.items() if a.state == "DEAD")
        found = infer_blocks(calls, repeats=self.repeats, task_slots=self._task_slots(), exclude=dead)
        if found is None:
            return None, None
        blocks, laid, held = found
        if plan is not None:
            # A plan found above (a fixed one keeps its reads on the plan) is kept unless a run has ended on a
            # call of another block and the blocks span more of the calls.
            spanned = (plan.end - plan.start if plan.reads_excluded
                       else rec.trace.calls_between(plan.start, plan.end))
            if not self.calls_interleave or held <= spanned:
                return None, None
        if admission.refusals(blocks, laid):
            return None, None           # (the plan found above, if any, may still run)
        return blocks, (laid, self._plan_index(blocks))

    def _task_slots(self):
        """How many pool workers a plan's task calls may be dealt over: those started, up to the pool's size;
        one where the script's actors alone outnumber the pool (the cores): there, another lent worker only
        adds a process taking turns on them (measured on marl_chain: 475 against 435 steps/s with two)."""
        rt = self.rt
        with rt.lock:
            started = sum(1 for w in rt.workers.values() if w.kind == "task" and w.ready and not w.dead)
            actors = sum(1 for a in rt.actors.values() if a.state != "DEAD")
        if actors >= rt.pool_target:
            return 1
        return max(1, min(rt.pool_target, started))

    def _record_submit(self, kind, target, actor, args, kwargs, num_returns, out):
        if num_returns == 0 or out is None:
            ref_ids = ()
        elif type(out) is ObjectRef:
            ref_ids = (out._id,)
        elif isinstance(out, ObjectRefGenerator):
            ref_ids = (out._stream_ref._id,)     # never iterate it here: that would consume the stream
        else:
            ref_ids = tuple(r._id for r in out)
        self.recorder.on_submit(kind, target, actor, args, kwargs or {}, num_returns, ref_ids,
                                nested_ref_ids(args, kwargs))
        self._recorded("submit")

    # ================================================================== entry points served here
    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        with self.lock:
            if self._enter():
                if type(num_returns) is int and num_returns >= 0:
                    out = self.run.call(handle._actor_id, info.name, args, kwargs, num_returns)
                    if out is not DEOPT:
                        return out
                else:
                    self.deopt("a generator call")
            out = self.rt.submit_actor_call(handle, info, args, kwargs, num_returns)
            if self.state is RECORDING:
                self._record_submit(ACTOR_METHOD, info.name, handle._actor_id, args, kwargs, num_returns, out)
            return out

    def submit_task(self, remote_function, args, kwargs, options):
        with self.lock:
            num_returns = submission.num_returns_of(options, remote_function._default_num_returns)
            if self._enter():
                if type(num_returns) is int and num_returns >= 0:
                    out = self.run.call(TASK_CALLER, _task_target(remote_function, options), args, kwargs,
                                        num_returns)
                    if out is not DEOPT:
                        return out
                else:
                    self.deopt("a generator call")
            out = self.rt.submit_task(remote_function, args, kwargs, options)
            if self.state is RECORDING:
                target = _task_target(remote_function, options)
                self.tasks[target] = (target, remote_function, options)
                self.recorder.on_task_options(target, options)
                self._record_submit(TASK, target, None, args, kwargs, num_returns, out)
            return out

    def put(self, value):
        with self.lock:
            if self._enter():
                out = self.run.put(value)
                if out is not DEOPT:
                    return out
            ref = self.rt.put(value)
            if self.state is RECORDING:
                nested = nested_ref_ids((value,), None)
                self.recorder.on_put(value, ref._id, nested.get(0, ()) if nested else ())
                self._recorded("put")
            return ref

    def get_values(self, object_ids, timeout):
        with self.lock:
            if self._enter():
                try:
                    out = self.run.get(object_ids, timeout)
                except exceptions.RayError:
                    self._deopt_if_a_worker_died()
                    raise
                if out is not DEOPT:
                    return out
            if self.state is RECORDING:
                self.recorder.on_get(list(object_ids), timeout)
                self._recorded("get")
        return self.rt.get_values(object_ids, timeout)

    def _deopt_if_a_worker_died(self):
        # A replayed get or wait that raised a worker's death (RayActorError...) ends the run now, so that
        # explain() and the fallbacks say so at once, not only when the script next calls the API.
        # (A try around the hot call costs nothing until it raises; a context manager would cost per call.)
        run = self.run
        if run is not None and run.reason is not None:
            self.deopt(run.reason)

    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        with self.lock:
            if self._enter():
                try:
                    out = self.run.wait(object_ids, num_returns, timeout)
                except exceptions.RayError:
                    self._deopt_if_a_worker_died()
                    raise
                if out is not DEOPT:
                    return out
            if self.state is RECORDING:
                self.recorder.on_wait(list(object_ids), num_returns, timeout)
                self._recorded("wait")
        return self.rt.wait_ids(object_ids, num_returns, timeout, fetch_local)

    def create_actor(self, actor_class, args, kwargs, options):
        with self.lock:
            self.pending = None          # a creation never repeats: the pattern a plan waited for has ended
            if self._enter():
                self.deopt(f"a new actor ({actor_class._cls.__name__})")
            handle = self.rt.create_actor(actor_class, args, kwargs, options)
            if self.state is RECORDING:
                concurrency = options.get("max_concurrency") or (1000 if actor_class._is_async else 1)
                self.recorder.on_actor_create(actor_class._cls.__qualname__, handle._actor_id, args, kwargs or {},
                                              concurrency, actor_class._is_async,
                                              max_task_retries=options.get("max_task_retries") or 0)
                self._recorded("create")
            return handle

    def kill_actor(self, actor_id, no_restart=True):
        with self.lock:
            self.pending = None          # (as for a creation)
            if self._enter():
                self.deopt("ray.kill of an actor")
            if self.state is RECORDING:
                self.recorder.on_actor_kill(actor_id)
                self._recorded("kill")
        return self.rt.kill_actor(actor_id, no_restart)

    def cancel(self, object_id, force=False, recursive=True):
        with self.lock:
            if self._enter() and self.run.cancel(object_id, force):   # (may refuse: force=True for an actor call)
                self.deopt("ray.cancel")
            if self.state is RECORDING:
                self.recorder.on_cancel(object_id)
                self._recorded("cancel")
        return self.rt.cancel(object_id, force, recursive)

    def worker_died(self, w):
        # The runtime calls this under its lock (service thread), once it has settled the death itself:
        # flags only, the replaying thread does the rest.
        for run in [self.run, *self.draining]:
            if run is not None:
                run.worker_died(w)

    def finish_submitted(self, timeout):
        """A clean exit: end a live run (its in-flight reactions finish and hand over), then wait for the
        dynamic runtime's calls.  The run ends by the script's choice, not a deviation: no fallback."""
        deadline = time.monotonic() + timeout
        with self.lock:
            if self.run is not None:
                self._leave_run("the script ended")
                self.state = OFF
            draining = list(self.draining)
        for run in draining:
            if run.handover is not None:
                run.handover.join(max(0.0, deadline - time.monotonic()))
        return self.rt.finish_submitted(max(0.0, deadline - time.monotonic()))

    def shutdown(self):
        with self.lock:
            run = self.run
            if run is not None:
                self.run = None
                run.abandon()
                self.runs.append(run.summary())
            for run in list(self.draining):
                run.abandon()
            self.state = OFF
            global LAST_SNAPSHOT
            LAST_SNAPSHOT = self.snapshot()
        if os.environ.get("RAYREACT_EXPLAIN"):
            import sys
            from . import explain as _explain
            print(_explain.Explanation(LAST_SNAPSHOT), file=sys.stderr)
        path = os.environ.get("RAYREACT_TIMELINE")
        if path:
            try:
                from . import explain as _explain
                _explain.write_timeline(self.timeline_events(), path)
            except Exception:  # noqa: BLE001 - never fail a shutdown for a trace file
                logger.exception("could not write the timeline")
        if self.bell is not None:
            self.bell.close()
            try:
                os.unlink(self.bell.path)
            except OSError:
                pass
            self.bell = None
        return self.rt.shutdown()

    def knows(self, oid):
        """Whether ``oid`` is a ref the running replay handed out (asked by the runtime on unknown ids)."""
        run = self.run
        return run is not None and oid in run.given.values()

    # ================================================================== visibility
    def replay_bell(self):
        if self.bell is None:
            self.bell = channel.Doorbell(f"{self.rt.session_prefix}-rbell", True)
            self.bell.enter_active()        # the replaying thread is the only waiter: always wake its word
        return self.bell

    def snapshot(self):
        """Plain data for explain(): state, current plan, runs, fallbacks, refusals."""
        runs = [r.summary() if isinstance(r, ReplayRun) else r for r in self.runs]
        run = self.run
        if run is not None:
            runs.append(run.summary())
        return {
            "state": self.state,
            "enabled": True,
            "runs": runs,
            "fallbacks": list(self.fallbacks),
            "refusals": dict(self.refusals),
            "completion_order": self.completion_order,      # (of the last recording)
            "plans_found": self.plans_found,
            "events": self.api_events,
            "pending": self.pending,
            "colocation": self.rt.colocation.report() if self.rt.colocation is not None else [],
        }

    def timeline_events(self):
        from . import explain as _explain
        runs = [r.summary(live=True) if isinstance(r, ReplayRun) else r for r in self.runs]
        if self.run is not None:
            runs.append(self.run.summary(live=True))
        return _explain.chrome_events(runs)


def _ref_id(ref):
    return ref._id if type(ref) is ObjectRef else ref


def _task_target(remote_function, options):
    """What a task call's guard compares, and the plan shows: the function (its name and a piece of its
    code id, so two functions of one name differ), and its options beyond ``num_returns``."""
    key = remote_function.__dict__.get("_replay_key")
    if key is None:
        name = remote_function._function_name.rsplit(".", 1)[-1]
        # A digest of the whole id: its leading bytes are this process' prefix, the same for every function.
        digest = hashlib.blake2b(submission.code_id_of(remote_function), digest_size=6).hexdigest()
        key = remote_function._replay_key = f"{name}@{digest}"
    if not options or (len(options) == 1 and "num_returns" in options):
        return key
    extra = ", ".join(f"{k}={v!r}" for k, v in sorted(options.items()) if k != "num_returns")
    return f"{key} ({extra})"


class ReplayRun:
    """One compiled plan running: the rings, the per-position driver ops, the tokens in flight.

    Its public methods serve the Reactor (``call``, ``put``, ``get``, ``wait``, ``cancel``, ``stop``, ...) and
    the DriverPath, which calls back for everything rare (``deviate``, ``begin_period``, ``absorb_deaths``,
    ...: listed in reactor.DriverPath's docstring); neither reaches the other's underscored names.

    Two parts do the start and the end, composed here and each holding the run:

        core.replay_wiring.Wiring      the rings, the workers' programs, the ops, the DriverPath (at start)
        core.replay_reads.OffPlanReads ``reads``: a get or wait the plan has not at that position, served
                                       without leaving replay when it only reads values
        core.replay_nested.NestedRefs  ``nested``: a call whose arguments nest refs (checked, lent to the
                                       callee, reachable through the dynamic table)
        core.replay_handover.Handover  ``ending``: the hand-over after ``stop``, cleanup, giving lent
                                       workers back, the timelines; its core.replay_rerun.Reruns reruns
                                       a dead lent worker's calls

    The run's interface to its parts (they use nothing else of it):

        facts       ``reactor``, ``rt``, ``ext``, ``plan``, ``number``, ``P``, ``start``, ``first``, ``R``,
                    ``task_of``, ``links`` (reactor name -> replay_ops.Link once the workers are taken)
        built by the wiring, read by both
                    ``bell``, ``gather``, ``poller``, ``spin``, ``paths`` (files to remove), ``ring_paths``,
                    ``writer_of``, ``driver_reads`` (connections routed to the driver), ``pair_paths``,
                    ``const_key``, ``const_ids``, ``ops`` (reactor.Op per position), ``fast`` (the DriverPath), ``started_workers``
        state       ``given``, ``cache``, ``windows``, ``death_payloads`` (the DriverPath's), ``handed``,
                    ``dead_pending``, ``reruns_due``, ``reason``, ``cancelled_tasks``, ``seed_views``, ``lent``,
                    ``abandoned``, ``handover`` (the thread), ``ended``, ``end_reason``
        methods     ``write``, ``drain``, ``send_desc``, ``fetch``, ``op_at``, ``absorb_deaths``, ``reap_arg_files``,
                    ``deviate``, ``deopt_at_next_call``
    """

    def __init__(self, reactor, plan, trace, first_index, number):
        self.reactor = reactor
        self.ext = reactor.ext
        self.rt = reactor.rt
        self.plan = plan
        self.number = number
        self.P = plan.period
        self.start = plan.start
        self.first = first_index
        self.owner = threading.get_ident()
        self.reason = None               # a deviation noticed asynchronously: deopt at the next call
        self.periods = 0
        self.repeats_needed = plan.repeats
        self.started = time.monotonic()
        self.ended = None
        self.end_reason = None
        self.handed = {}                 # (connection, producer index) -> descriptor (deopt handover)
        self.handover = None             # the thread handing values over after a deopt
        self.abandoned = False           # shutdown: stop handing over
        self.dead_pending = []
        self.reruns_due = False          # a lent worker or a retried actor died: its calls run again dynamically
        self.seed_views = []
        self.fast = None                 # the DriverPath (reactor.pyx): given, cache, windows, idx live there
        self.ending = Handover(self)
        self.reads = OffPlanReads(self)
        self.nested = NestedRefs(self)
        self.const_ids = {}              # constant connection -> the ref id it stands for (the wiring's)
        max_lag = max((u.lag for c in plan.connections for u in c.uses), default=0)
        self.R = max(2, max_lag + 2)
        self.links = {}
        self.pair_paths = {}             # (writer, reader) -> the ring between two workers (the wiring's)
        self.cancelled_tasks = set()     # trace indices of rerunnable calls ray.cancel named (their reruns fail)
        self.lent = []                   # pool workers lent to this run's task reactors
        self.task_of = {}                # plan target key -> (guard target, RemoteFunction, options)
        for reaction in plan.reactions:
            if reaction.op == "task":
                if reaction.target not in reactor.tasks:
                    raise Refused(f"position {reaction.position}: a task this driver did not record")
                self.task_of[reaction.target] = reactor.tasks[reaction.target]
        code_ids = [submission.code_id_of(fn) for _, fn, _ in self.task_of.values()]

        task_reactors = [r.name for r in plan.reactors if r.kind == "task"]
        self._check_actors()
        if not self.links and not task_reactors:
            raise Refused("no actor or task in the period")
        seeds = plan.seeds(first_index)
        seed_ids = [trace.ref_id(s.producer, s.ret) for s in seeds]
        if None in seed_ids:
            raise Refused("a value the plan starts from was never made (its block was skipped)")
        # Values the plan only passes on as refs (nested in an argument) need not be ready, nor sent anywhere:
        # the run just knows their refs (replay_nested).
        lent_seeds = [(s, oid) for s, oid in zip(seeds, seed_ids) if s.connection in self.nested.ref_only]
        if lent_seeds:
            seeds = [s for s in seeds if s.connection not in self.nested.ref_only]
            seed_ids = [trace.ref_id(s.producer, s.ret) for s in seeds]
        if any(oid not in self.rt.object_table for _, oid in lent_seeds):
            raise Refused("a value the plan starts from was freed")
        self.made_before = self._results_to_relay(trace)
        # The actor calls made in the recording before the plan's loop: a run that ends on one of them at a
        # period's beginning shows blocks of calls taken in turn (``Reactor.calls_interleave``).
        before = trace.events[:max(0, plan.start - trace.first_index)]
        self.called_before = frozenset((ev.actor, ev.target) for ev in before
                                       if type(ev) is Submit and ev.kind == ACTOR_METHOD)
        relays = [c for c in plan.connections if c.source == "relay"]
        if any(c.producer == ANY_POSITION for c in relays):
            # (a plan of blocks: any call's result may be relayed)
            self.relayed_conns = frozenset(cid for r in plan.reactions if r.op in ("actor_method", "task")
                                           for cid in r.outputs)
        else:
            self.relayed_conns = frozenset(plan.reactions[c.producer].outputs[c.ret] for c in relays)
        hostable = self._hostable_tasks(task_reactors)
        self._wait_for_dynamic_calls(seed_ids + list(self.made_before), len(task_reactors) - len(hostable))
        hosted = self._hosts_for_tasks(hostable)
        seed_descs = self._take_workers_and_seeds(seeds, seed_ids, task_reactors, code_ids, hosted)

        self.paths = []
        self.ring_paths = []
        self.gather = None
        self.poller = None
        self.started_workers = False
        try:
            Wiring(self).start(trace, seeds, seed_ids, seed_descs, lent_seeds)
            self.call, self.get, self.wait = self.fast.call, self.fast.get, self.fast.wait
        except BaseException:
            try:
                self._undo_failed_start()
            finally:
                raise
        self._note_hosted_tasks(hosted)

    # ------------------------------------------------------------------ plan checks
    def _check_actors(self):
        """Every actor reactor names a live actor (core.admission has checked what kind of actor it is); until
        its worker is known ready, ``links`` holds the actor's state."""
        rt = self.rt
        with rt.lock:
            for r in self.plan.reactors:
                if r.kind != "actor":
                    continue
                a = rt.actors.get(bytes.fromhex(r.actor))
                if a is None or a.state == "DEAD":
                    raise Refused(f"{r.name}: the actor is dead")
                self.links[r.name] = a

    def _results_to_relay(self, trace):
        """A loop in completion order: the results of calls like its relayed positions' made before the run
        (in the recorded periods, or before them) and not yet passed on: ref id -> (trace index, ret, the
        position they stand for).  The script names them in the run's first periods."""
        plan, first = self.plan, self.first
        # (a relay from any position takes a value made before the run once it is ready: ``relayable``)
        wanted = {(c.producer, c.ret) for c in plan.connections if c.source == "relay" and c.producer != ANY_POSITION}
        if not wanted:
            return {}
        table = self.rt.object_table
        events = [trace.event(index) for index in range(trace.first_index, first)]
        passed = {(ref.producer, ref.ret) for ev in events for ref in ref_slots(ev)}
        out = {}
        for position, ret in wanted:
            reaction = plan.reactions[position]
            members = plan.members(reaction.reactor)
            actors = {r.actor for r in plan.reactors if r.name in members and r.actor}
            for ev in events:
                if (type(ev) is Submit and ev.kind == reaction.op and key_text(ev.target) == reaction.target
                        and (ev.kind == TASK or key_text(ev.actor) in actors)
                        and ev.num_returns == len(reaction.outputs) and (ev.index, ret) not in passed):
                    oid = trace.ref_id(ev.index, ret)
                    if oid in table:
                        out[oid] = (ev.index, ret, position)
        return out

    def _wait_for_dynamic_calls(self, seed_ids, task_workers_needed):
        """The dynamic runtime must have finished what the script asked of these actors before."""
        rt = self.rt
        actors = list(self.links.values())
        table = rt.object_table

        if any(oid not in table for oid in seed_ids):
            raise Refused("a value the plan starts from was freed")

        def quiet():
            for a in actors:
                if a.queues.get(-1) or a.state != "ALIVE" or a.worker is None or not a.worker.pid \
                        or not a.worker.ready:
                    return False
            for oid in seed_ids:
                if not table.is_ready(oid):
                    return False
            return True

        if not rt.wait_until(quiet, 30.0):
            raise Refused("the dynamic calls before the switch point did not finish")

        def enough_idle_workers():
            return len(rt.lendable_task_workers()) >= task_workers_needed

        # The loop's own tasks are done by now; a worker still busy runs something else: do not wait for it.
        if task_workers_needed and not rt.wait_until(enough_idle_workers, 0.5):
            raise Refused(f"fewer than {task_workers_needed} idle pool workers to lend to the plan's task calls")

    def _hostable_tasks(self, task_reactors):
        """Co-location: the task reactors whose calls may run in a host process (their functions write no
        module state; no GPU, no env of their own), as many as there are hosts."""
        col = self.rt.colocation
        if col is None or not task_reactors:
            return []
        with self.rt.lock:
            hosts = len(col.live_hosts(started=False))
        plan = self.plan
        hostable = []
        for name in task_reactors:
            why = None
            for q in plan.reactor(name).schedule:
                _, fn, options = self.task_of[plan.reactions[q].target]
                why = col.task_refusal(fn, submission.code_id_of(fn), options)
                if why is not None:
                    col.note_task_apart(fn._function_name.rsplit(".", 1)[-1], why)
                    break
            if why is None and len(hostable) < hosts:
                hostable.append(name)
        return hostable

    def _hosts_for_tasks(self, hostable):
        """The host process each of ``hostable``'s task reactors runs in (task name -> the host's worker): the
        host of most of the actors it exchanges values with, one reactor per host.  A hostable one left
        without a started host, and all others, are lent pool workers."""
        col = self.rt.colocation
        if not hostable:
            return {}
        with self.rt.lock:
            free = col.live_hosts()
            host_of = {name: a.worker.host for name, a in self.links.items()
                       if a.worker is not None and a.worker.host is not None}
        plan = self.plan
        hosted = {}
        for name in hostable:
            if not free:
                break
            near = collections.Counter()
            for c in plan.connections:
                if c.reactor == name:
                    near.update(host_of.get(u.reactor) for u in c.uses)
                elif any(u.reactor == name for u in c.uses):
                    near[host_of.get(c.reactor)] += 1
            host = max(free, key=lambda h: (near[h], -len(h.guests)))
            if not near[host]:
                continue                 # (no actor it exchanges values with is hosted: it would only crowd one)
            free.remove(host)
            hosted[name] = host
        return hosted

    def _note_hosted_tasks(self, hosted):
        """For explain: the functions whose calls this run (started now) hosts."""
        plan = self.plan
        for name in hosted:
            self.rt.colocation.note_tasks_hosted(
                {self.task_of[plan.reactions[q].target][1]._function_name.rsplit(".", 1)[-1]
                 for q in plan.reactor(name).schedule})

    def _take_workers_and_seeds(self, seeds, seed_ids, task_reactors, code_ids, hosted):
        """In one hold of the runtime's lock: a link per actor worker, the descriptors of the values the plan
        starts from, and the workers lent to the task reactors (pool workers, or ``hosted``'s hosts)."""
        rt = self.rt
        table = rt.object_table
        with rt.lock:
            for name, a in list(self.links.items()):
                if a.state != "ALIVE" or a.worker is None or a.worker.dead:
                    raise Refused(f"{name}: the actor is not alive")
                self.links[name] = Link(name, a.worker, a)
            seed_descs = []
            for s, oid in zip(seeds, seed_ids):
                e = table.get(oid)
                if e is None or e.state != READY:
                    raise Refused("a value the plan starts from was freed")
                if e.desc[2]:
                    raise Refused("a value the plan starts from nests refs")
                seed_descs.append(e.desc)
            for name, host in hosted.items():
                if host.dead:
                    raise Refused(f"{name}: the host process chosen for its calls died")
            pooled = [name for name in task_reactors if name not in hosted]
            if pooled:
                lent = rt.pin_task_workers(len(pooled), code_ids)
                if lent is None:
                    raise Refused("no idle pool worker to lend to the plan's task calls")
                self.lent = lent
                for name, w in zip(pooled, lent):
                    self.links[name] = Link(name, w, TaskSlot())
            for name, host in hosted.items():
                rt.lend_host_to_tasks(host, code_ids)
                self.lent.append(host)
                self.links[name] = Link(name, host, TaskSlot())
        return seed_descs

    def _undo_failed_start(self):
        """Never leave workers in reactor mode, or files behind, for a plan that did not start."""
        if self.started_workers:
            self.stop("the plan failed to start", wait=True)
        else:
            self.ending.cleanup()
            self.ending.give_back_workers()

    # ------------------------------------------------------------------ state and transport
    # The hot path's state lives in the DriverPath.
    idx = property(lambda self: self.fast.idx)
    given = property(lambda self: self.fast.given)
    cache = property(lambda self: self.fast.cache)
    driver_log = property(lambda self: self.fast.driver_log)
    death_payloads = property(lambda self: self.fast.dead_payloads)

    @property
    def windows(self):
        return self.fast.windows

    def send_desc(self, link, conn, producer, desc, owned=False, pin=True):
        """A TOKEN frame to a worker from a dynamic object descriptor (a segment gets the reader's own link).

        A file the dynamic table owns stays mapped here for the run (``pin``), so the segment
        pool cannot recycle it before the reader has mapped its link.  (The reader's link alone keeps the
        pool from recycling it too: a relay, which happens every period, pins nothing.)"""
        ext = self.ext
        flags = ext.F_ERROR if desc[3] else 0
        path = None
        if desc[0] == serialization.SEGMENT:
            if not owned and pin:
                self.seed_views.append(self.rt.object_table.view_segment(desc[1]))
            path = f"{desc[1]}.s{self.number}.{link.w.index}.{os.urandom(3).hex()}"
            os.link(desc[1], path)
            frame = ext.token_frame(conn, producer, flags | ext.F_SEGMENT, path)
        else:
            frame = ext.token_frame(conn, producer, flags, desc[1])
        if not self.write(link, frame) and path is not None:
            ext.free_segment(path)              # (the worker is gone)

    def write(self, link, frame):
        return self.fast.write(link, frame)

    def relay(self, link, idx, relays):
        """Write into ``link``'s inbox, keyed by the call's index ``idx``, the value of each ref the call
        passes that reaches back a varying number of periods: ``relays`` = (relay connection, the result's
        connection, its producer index, ref id, whether the slot takes any value: a plan of blocks).  False
        (nothing written) if one is not here yet: the call would wait for it, and the script must not wait long
        (what it waits for may come from what it does next): in a plan of blocks a result of the plan's own is
        waited for ``RELAY_WAIT_S`` at most (the weights asked for just before the call that takes them)."""
        fast = self.fast
        found = []
        for conn, out_conn, producer, oid, from_any in relays:
            if oid not in self.made_before:
                key = (out_conn, producer)
                tok = fast.known(key)
                if tok is None:
                    fast.drain()
                    tok = fast.known(key)
                if tok is None and from_any and out_conn in self.driver_reads:
                    tokens = fast.collect([key], RELAY_WAIT_S, 1)
                    tok = tokens[0] if tokens else None
                if tok is None or tok.flags & self.ext.F_REFS:
                    return False                # (not here yet, or nesting refs a relay would not lend)
                found.append((conn, tok, None))
                continue
            # Made before the run, or moved to the dynamic table since: its value is there, whatever became of
            # its writer.
            e = self.rt.object_table.get(oid)
            if e is None or e.state != READY or e.desc[2]:
                return False                    # (not here yet, or nesting refs a relay would not lend)
            found.append((conn, None, e.desc))
        ext = self.ext
        for conn, tok, desc in found:
            if desc is not None:
                self.send_desc(link, conn, idx, desc, pin=False)
            elif tok.path is not None:
                path = f"{tok.path}.r{os.urandom(3).hex()}"
                os.link(tok.path, path)
                if not self.write(link, ext.frame_for(conn, idx, tok, path)):
                    ext.free_segment(path)      # (the worker is gone)
            else:
                self.write(link, ext.frame_for(conn, idx, tok))
        return True

    def relayable(self, oid, ret, position):
        """Whether a ref the plan does not know may stand at a relay slot: a ready value of the dynamic table
        (made before recording, say); if so it is noted with the results made before the run."""
        e = self.rt.object_table.get(oid)
        if e is None or e.state != READY or e.desc[2]:
            return False
        self.made_before[oid] = (-1, ret, position)
        return True

    def writer_at(self, key):
        """The reactor that writes ``key`` = (connection, producer index): a pool's member per call."""
        writer = self.writer_of.get(key[0])
        if writer in self.fast.pool_names:
            return self.fast.pool_writer.get(key[1])
        return writer

    def fetch(self, link, key):
        """Ask a worker for a value it made, ``key`` = (connection, producer index): it hands it over
        (HANDOVER, into ``handed``) as soon as it has it, or as lost if it no longer keeps it."""
        self.write(link, self.ext.control_frame(self.ext.FETCH, [key]))

    def drain(self):
        return self.fast.drain()

    def worker_noted(self, info):
        """A NOTE a worker sent (``(what, index)``: a reaction raised, returned refs, or its actor exited);
        the DriverPath hands it here as it drains the rings."""
        what, index = info
        if what == "raised":
            self.deopt_at_next_call(f"a reaction raised ({self._label_at(index)}, "
                                    f"iteration {self._iteration(index)})")
        elif what == "refs":
            self.deopt_at_next_call(f"a reaction returned a value nesting refs ({self._label_at(index)})")
        elif what == "exit":
            self.deopt_at_next_call(f"an actor exited ({self._label_at(index)})")

    def cancel(self, object_id, force) -> bool:
        """ray.cancel of a replayed call's result, as dynamic mode would do it; whether the run must stop.

        A task's lent worker skips or interrupts that invocation (unless ``force``: then the
        dynamic cancel kills the worker after the drain), and the run stops.  An actor call is
        not interrupted: if it has not finished, ray.get of its result raises TaskCancelledError
        (``fast.get`` and the handover see to that), and the run goes on unless the result
        feeds another reaction, which would have to fail with it."""
        for (index, _), oid in self.fast.given.items():
            if oid == object_id:
                break
        else:
            return True
        op = self.ops[(index - self.start) % self.P]
        link = op.link
        if link is None or link.dead or op.pool is not None or op.relayed:
            return True                            # (a pool's call, or a relayed result: cancelled after the run)

        def unfinished():
            try:
                return not link.stopped and link.timeline.last_index() < index
            except (ValueError, TypeError):        # the run has ended and closed its log
                return False

        if not link.is_task:
            if not unfinished():
                return False                       # finished: nothing happens, as in Ray
            if force:
                raise ValueError("force=True is not supported for actor tasks.")
            given = self.fast.given
            self.fast.cancelled.update(given[index, ret] for ret in range(op.nret) if (index, ret) in given)
            if link.inflight is not None:
                self.cancelled_tasks.add(index)    # (should its actor die, the call is not sent again)
            return op.feeds_workers
        self.cancelled_tasks.add(index)            # (should its worker die, its rerun fails as cancelled)
        if not force:                              # else the drain would wait for it to finish
            link.w.bell.cancel_invocation(index)
            if link.w.kind == "task":
                self.rt.interrupt(link.w, unfinished)
            elif unfinished():
                # A host's call is skipped if it has not started, and never interrupted (its actors share the
                # thread): as for an actor call, its result is cancelled all the same.
                given = self.fast.given
                self.fast.cancelled.update(given[index, ret] for ret in range(op.nret) if (index, ret) in given)
        return True

    def deopt_at_next_call(self, reason):
        """Note a deviation seen outside the script's call (a worker, a signal): the first reason wins, and
        the reactor deoptimizes when the script next calls the API."""
        if self.reason is None:
            self.reason = reason

    def _label_at(self, index):
        op = self.ops[(index - self.start) % self.P]
        return op.label

    def _iteration(self, index):
        return (index - self.first) // self.P

    def worker_died(self, w):
        """From the runtime's death handling (any thread, under its lock): flag and wake the replayer."""
        for link in self.links.values():
            if link.w is w:
                self.dead_pending.append(link)
                who = f"actor {link.actor.class_name}" if link.actor is not None else "a lent task worker"
                self.deopt_at_next_call(f"the worker of {who} (pid {w.pid}) died")
                self.gather.bump()
                self.bell.ring()

    def absorb_deaths(self):
        """Tell the survivors which writers are gone (their missing tokens become the death error).  The
        replaying thread calls this (the DriverPath too, while it waits) once ``dead_pending`` fills."""
        while self.dead_pending:
            link = self.dead_pending.pop()
            if link.dead:
                continue
            link.dead = True
            self._close_rings_to(link.name)
            self.drain()
            if link.inflight is not None:
                # No DEAD notice: the reactions reading its results get those of its calls' reruns
                # (core.replay_rerun: a lent worker's calls, or a retried actor's after its restart), once
                # the script's next call has stopped the run.
                self.reruns_due = True
                continue
            err = link.actor.death_error or exceptions.ActorDiedError(
                error_msg=f"The actor {link.actor.class_name} died.")
            payload = serialization.serialize(err, is_error=True).pack()
            self.death_payloads[link.name] = payload
            self.nested.writer_died(link.name, payload)
            for other in self.links.values():
                if not other.dead:
                    self.write(other, self.ext.control_frame(self.ext.DEAD, (link.name, payload)))

    def _close_rings_to(self, name):
        """A worker died: its writers must not wait for room in its rings (a full one would hold them)."""
        for (_, reader), path in self.pair_paths.items():
            if reader == name:
                try:
                    ring = channel.Ring(path)
                except OSError:
                    continue
                ring.mark_closed()
                ring.close()

    # ------------------------------------------------------------------ the fast paths
    def deviate(self, what):
        """The script's call is not the one the plan expects (``what`` it was): deoptimize, and answer DEOPT
        so that the caller runs the call dynamically."""
        q = (self.idx - self.start) % self.P
        self.reactor.deopt(f"iteration {self._iteration(self.idx)}, position {q}: expected "
                           f"{self.ops[q].label}, got {what}")
        return DEOPT

    def put(self, value):
        ext = self.ext
        began = 0
        if self.ops[(self.idx - self.start) % self.P].kind in (ext.GET, ext.WAIT):
            began = self.fast.skip_reads()          # the script went on without the plan's read here
        idx = self.idx
        q = (idx - self.start) % self.P
        op = self.ops[q]
        if op.kind != ext.PUT:
            return self.deviate("a put")
        if isinstance(value, ObjectRef):
            return self.deviate("a put of a ref")
        if q == 0 and idx != self.first and not began:
            self.begin_period(idx)
        try:
            ser = serialization.serialize(value)
        except serialization.SerializationError as exc:
            raise TypeError(str(exc)) from exc.__cause__
        made = None
        if ser.contained:
            # (A big one would need the run's segment and the dynamic table's entry to share a file.)
            made = self.nested.put_refs(idx, value, ser) if ser.size <= serialization.INLINE_LIMIT else None
            if made is None:
                return self.deviate("a put of a value nesting other refs than the plan's, or a big one")
        ext = self.ext
        if ser.size <= serialization.INLINE_LIMIT:
            tok = ext.Token(0, ser.pack())
            frame = ext.token_frame(op.conn, idx, 0, tok.data)
            for link in op.readers:
                self.write(link, frame)
        else:
            path = f"{self.rt.session_prefix}-rp{ids.new_id().hex()}"
            ser.write_segment(path)
            tok = ext.Token(0, serialization.map_segment(path), path)
            for link in op.readers:
                self.send_desc(link, op.conn, idx, (serialization.SEGMENT, path, [], False), True)
        self.fast.idx = idx + 1
        self.cache[(op.conn, idx)] = tok
        oid = ids.new_id()
        self.given[(idx, 0)] = oid
        self.windows[-1][1].append((idx, 0, op.conn))
        ref = ObjectRef(oid)
        if made is not None:
            self.nested.keep_put(idx, oid, made, ser)      # (once the ref exists, which keeps the entry)
        return ref

    # ------------------------------------------------------------------ aging: the plan's buffering
    def begin_period(self, idx):
        """A period begins at ``idx``: forget values the script can no longer name; values made R periods
        ago and still held move to the dynamic object table (once here, if only a worker had them: it is
        asked for them and they come later)."""
        self.periods += 1
        self.reap_arg_files()
        windows = self.windows
        horizon = idx - self.R * self.P
        self.nested.forget_puts(horizon)
        counts = refcount.counts
        objects = self.rt.object_table.entries
        given, cache = self.given, self.cache
        only_in_workers = []
        for start, keys in windows:
            if start >= horizon:
                break
            for index, ret, conn in keys:
                oid = given.get((index, ret))
                if oid is not None and counts.get(oid) and oid not in objects and (conn, index) not in cache:
                    only_in_workers.append((conn, index))
        # Values kept past the plan's buffering that only a worker has: asked of it (FETCH), to move to the
        # dynamic table with the rest below once they are here (until then they stay in their window).
        if only_in_workers:
            self.reads.bring(only_in_workers)
        kept = collections.deque()
        promote = []
        driver_reads, forgotten, adopting = self.driver_reads, self.fast.forgotten, self.fast.adopting
        relayed = self.relayed_conns
        for start, keys in windows:
            old = start < horizon
            left = []
            for key in keys:
                index, ret, conn = key
                oid = given.get((index, ret))
                alive = oid is not None and counts.get(oid)
                if alive and (not old or (conn, index) in adopting):
                    left.append(key)                # (lent nested in an argument: kept until it has come)
                    continue
                if alive and oid not in objects:
                    tok = cache.pop((conn, index), None)
                    if tok is None:
                        left.append(key)            # asked of its worker, still to come
                        continue
                    promote.append((oid, tok))
                    given.pop((index, ret), None)
                    if conn in relayed:
                        # A result of a loop in completion order passed on late: relayed from the dynamic table.
                        self.made_before[oid] = (index, ret, self.plan.position(index))
                    continue
                # Nobody can name it any more (a dead ref is never passed again): free it now.
                given.pop((index, ret), None)
                tok = cache.pop((conn, index), None)
                if tok is not None:
                    tok.free()
                elif conn in driver_reads:
                    forgotten.add((conn, index))    # still on its way: freed as it comes
            if left:
                kept.append((start, left))
        kept.append((idx, []))
        self.fast.windows = kept
        if (self.plan.pools or self.plan.blocks) and self.periods % 16 == 0:
            # A member the script seldom calls reads the tokens sent to every member only when called, and a
            # block the script seldom takes forgets old tokens only when it runs: they are told now and then
            # which they may forget.
            age = self.ext.control_frame(self.ext.AGE, idx)
            names = self.links if self.plan.blocks else [m for pool in self.plan.pools for m in pool.members]
            for name in names:
                link = self.links[name]
                if not link.dead:
                    self.write(link, age)
        if relayed:
            fast = self.fast
            fast.made = {oid: made for oid, made in fast.made.items() if given.get(made) == oid}
            if fast.pool_writer:
                oldest = kept[0][0]
                fast.pool_writer = {i: w for i, w in fast.pool_writer.items() if i >= oldest}
            if self.periods % 64 == 0:
                for oid in [oid for oid in self.made_before if not counts.get(oid)]:
                    del self.made_before[oid]       # (the script dropped it: never passed on)
        if promote:
            self._adopt(promote)

    def reap_arg_files(self):
        """Free argument files of reactions that have run (the driver wrote them: it recycles them hot)."""
        free = self.ext.free_segment
        for link in self.links.values():
            files = link.arg_files
            inflight = link.inflight
            if (files or inflight) and link.timeline is not None:
                done = link.timeline.last_index()
                while files and files[0][0] <= done:
                    free(files.popleft()[1])
                while inflight and inflight[0][0] <= done:
                    inflight.popleft()

    def _adopt(self, pairs):
        """Move values the script still holds into the dynamic object table."""
        self.rt.object_table.adopt(pairs, take_descriptor)

    # ------------------------------------------------------------------ leaving
    def stop(self, reason, wait=False):
        """Leave replay without waiting for the workers: STOP every link, make every value the script can
        name a pending object of the dynamic runtime, and hand the values over on a thread of their own.

        An in-flight reaction may wait for something the script does only after the deviating call (Ray
        would not block that call), so nothing here waits for a reaction.  The workers run the calls the
        script makes from now on after their in-flight reactions (reactor.pyx holds them)."""
        self.ending.stop(reason, wait)

    def get_off_plan(self, object_ids, timeout, reason):
        """A get the plan has not here (``reason``: how it differs): served if it only reads values, else
        ``deviate`` (core.replay_reads)."""
        return self.reads.get(object_ids, timeout, reason)

    def wait_off_plan(self, object_ids, num_returns, timeout, reason):
        """``get_off_plan`` for a wait."""
        return self.reads.wait(object_ids, num_returns, timeout, reason)

    def deviate_call(self, actor_id, method, how):
        """``deviate`` for a call of ``method`` (``how`` it differs from the plan's, or None: another call)."""
        name = self.call_name(actor_id, method)
        op = self.ops[(self.idx - self.start) % self.P]
        if (op.kind == self.ext.CALL and op.method == method and actor_id not in (op.actor, TASK_CALLER)
                and (op.pool is None or actor_id not in op.pool)):
            called = self.rt.actors.get(actor_id)
            expected = op.link.actor
            if called is not None and called.class_name == getattr(expected, "class_name", None):
                self.reactor.rotation_broke |= {method}     # (another actor of the class the plan expected)
        if (op.kind == self.ext.CALL and op.method != method and self.periods
                and (actor_id, method) in self.called_before and (op.position == 0 or op.position in self.plan.blocks)):
            # At a period's beginning, a call the script made before the loop began: it takes blocks in turn.
            self.reactor.calls_interleave = True
        return self.deviate(f"a call of {name}" if how is None else f"{name} {how}")

    def rerunnable_worker_lost(self):
        """A lent worker, or the worker of an actor with ``max_task_retries``, died while the script waited on a
        result: its unfinished calls run again dynamically (Ray retries them), so deoptimize now and wait for
        them there."""
        self.reactor.deopt(self.reason or "the worker of a replayed task died")

    def call_name(self, actor_id, method):
        """How a deviation message names a call: the method, or the task's function."""
        return method.split("@", 1)[0] if actor_id == TASK_CALLER else method

    def op_at(self, index):
        return self.ops[(index - self.start) % self.P]

    def abandon(self):
        """Shutdown while replaying or handing over: nothing to hand over, just free what we made."""
        self.abandoned = True
        if self.handover is not None:
            self.handover.join(5.0)       # it looks at ``abandoned`` at least every 0.2 s
            return
        self.end_reason = "shutdown"
        self.ending.cleanup()
        self.ending.give_back_workers()

    # ------------------------------------------------------------------ visibility
    def summary(self, live=False):
        """Plain data about this run, for explain() and the timeline."""
        timeline = self.ending.timeline
        if timeline is None and live:
            timeline = self.ending.read_timeline()
        return {
            "number": self.number,
            "plan": self.plan,
            "first": self.first,
            "index": self.idx,
            "periods": self.periods,
            "off_plan_reads": self.reads.count,
            "skipped_reads": self.fast.skipped if self.fast is not None else 0,
            "started": self.started - self.reactor.started,
            "ended": None if self.ended is None else self.ended - self.reactor.started,
            "reason": self.end_reason,
            "handing_over": self.handover is not None and self.handover.is_alive(),
            "workers": {name: (link.pid, link.actor.class_name) for name, link in self.links.items()},
            "timeline": timeline or {},
            "driver": (os.getpid(), list(self.driver_log)),
            "labels": [op.label for op in self.ops],
        }
