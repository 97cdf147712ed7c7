"""Whether a plan may replay: the one place that decides it, with every reason.

::

    record ──Trace──▶ infer ──Plan──▶ refusals(plan, trace) ──▶ none: replay    some: explain() lists them
                        │                 │
                        └─ blockers() ────┤  the pattern is no fixed reactor graph (Plan.blockers)
                                          └─ engine_limits()  a fixed graph this replay engine does not run yet

Two levels, kept apart so that a plan says what the *pattern* is whatever the engine can do: ``infer``
fills ``Plan.blockers`` with :func:`blockers` (actors whose concurrency is unknown, counts that are not
fixed, values read too many periods late); :func:`engine_limits` adds what core.replay cannot run yet
(a put nesting refs whose ref is passed nested, task options it does not honour, an actor whose calls
may be retried reading its own results, a threaded or async one whose calls may be retried), and :func:`cannot_pay` the cost rule (calls so long that replay saves nothing worth its
switch).  The reactor replays a plan only if :func:`refusals` is empty, and ``explain()`` lists each
refusal it met with its count.  Everything here is pure and reads plain data: the plan, and what the
trace recorded beside its events (each actor's concurrency, the options of each task call site, the time
of each event).

Whether a replayable plan can *start* at a given moment (its actors still alive, the calls before the
switch point done, pool workers idle to lend) is not a property of the pattern: ``ReplayRun`` finds that
out when it starts, and a start that fails is reported as such.
"""

from __future__ import annotations

from .plan import key_text


# Task options the replay engine honours; a call site with any other runs dynamically.
REPLAYED_TASK_OPTIONS = frozenset(("num_returns", "max_retries", "name"))


# A loop whose calls take this long each gains under 0.1% from replay (it saves ~50-100 us of a dynamic call's
# overhead): the switch's wait for the dynamic calls and the risk of a fallback are not worth paying.
COSTLY_CALL_S = 0.1


def refusals(plan, trace) -> tuple[str, ...]:
    """Every reason the reactor must not replay ``plan`` (empty: it may), most fundamental first."""
    return tuple(plan.blockers) + engine_limits(plan, trace) + cannot_pay(plan, trace)


def blockers(plan, trace, max_lag: int) -> tuple[str, ...]:
    """Why the pattern is no fixed reactor graph: ``Plan.blockers``."""
    return tuple(_unknown_actors(plan, trace) + _returns(plan) + _lags(plan, max_lag))


def engine_limits(plan, trace) -> tuple[str, ...]:
    """Why this replay engine does not run a fixed reactor graph (yet)."""
    return tuple(_tasks(plan, trace) + _nested_refs(plan) + _retried_actors_reading_themselves(plan, trace)
                 + _retried_concurrent_actors(plan, trace) + _pools(plan, trace))


def cannot_pay(plan, trace) -> tuple[str, ...]:
    """The cost rule: replay declines a loop whose recorded periods (but the first) all took ``COSTLY_CALL_S`` or
    more per call.  ``trace`` is the one the plan was found in (its indices: without the reads where
    ``plan.reads_excluded``)."""
    costs = _costs_per_call(plan, trace)
    if not costs or min(costs[1:] or [0.0]) < COSTLY_CALL_S:
        return ()
    # (one wording whatever the figure, so that explain() counts the refusals together)
    return (f"calls of {COSTLY_CALL_S * 1e3:.0f} ms or more each: replay would save under 0.1% of the loop's time",)


def cost_unclear(plan, trace) -> bool:
    """Only the first period is there to judge by and it was slow (its actors may have been starting): the
    reactor waits for another before it decides."""
    costs = _costs_per_call(plan, trace)
    return len(costs) == 1 and costs[0] >= COSTLY_CALL_S


def _costs_per_call(plan, trace):
    """Seconds per call of each recorded period, first to last ([] without the events' times).  An event's time
    is taken as it is called, so a period runs from its first event to the next period's first, and the
    waits of its reads fall inside it."""
    times = trace.times
    if len(times) != len(trace.events):
        return []
    calls = max(1, sum(1 for r in plan.reactions if r.op in ("task", "actor_method")))
    first = plan.start - trace.first_index
    starts = [first + k * plan.period for k in range(plan.repeats + 1) if first + k * plan.period < len(times)]
    return [(times[b] - times[a]) / calls for a, b in zip(starts, starts[1:])]


def _actor_infos(plan, trace):
    """(reactor, its ActorInfo or None) for each actor reactor (reactors name actors by hex id)."""
    by_name = {key_text(k): info for k, info in trace.actors.items()}
    return [(r, by_name.get(r.actor)) for r in plan.reactors if r.kind == "actor"]


def _unknown_actors(plan, trace):
    return [f"{reactor.name}: created before recording, its concurrency is unknown"
            for reactor, info in _actor_infos(plan, trace) if info is None]


def _retried_concurrent_actors(plan, trace):
    # A threaded or async actor's calls end out of order, and a rerun after its death takes the calls not
    # known to have ended by the timeline, which logs in call order: one that had ended would run twice.
    return [f"{reactor.name}: a threaded or async actor whose calls may be retried (max_task_retries)"
            for reactor, info in _actor_infos(plan, trace)
            if info is not None and info.concurrent and info.max_task_retries][:1]


def _retried_actors_reading_themselves(plan, trace):
    # A retried call's inputs must outlive its actor's death; a value the actor made and reads itself lives in
    # its process alone (Ray would keep it in the object store).
    retried = {reactor.name for reactor, info in _actor_infos(plan, trace)
               if info is not None and info.max_task_retries}
    return [f"{c.reactor}: an actor whose calls may be retried (max_task_retries) reads its own results"
            for c in plan.connections
            if c.source == "period" and c.reactor in retried and any(u.reactor == c.reactor for u in c.uses)][:1]


def _pools(plan, trace):
    """A loop in completion order replays when each pool's members serve that one position and are plain
    actors (calls in order, not retried), and each ref reaching back a varying distance is an argument whose
    value the driver relays: a result that only the driver reads (the script waits on it)."""
    if not plan.pools and not any(c.source == "relay" for c in plan.connections):
        return []
    infos = dict((r.name, info) for r, info in _actor_infos(plan, trace))
    for pool in plan.pools:
        for name in pool.members:
            info = infos.get(name)
            if info is not None and (info.concurrent or info.max_task_retries):
                return [f"{pool.name}: a pool of threaded, async or retried actors (its loop runs in "
                        "completion order)"]
            if plan.reactor(name).schedule != (pool.position,):
                return [f"{pool.name}: a member is also called at another position of the period"]
        reaction = plan.reactions[pool.position]
        if any(a.nested for a in reaction.args):
            return [f"{pool.name}: refs nested in the pooled call's arguments"]
        rerun = {r.name for r in plan.reactors if r.kind == "task"} | {
            r.name for r, info in _actor_infos(plan, trace) if info is not None and info.max_task_retries}
        if any(plan.connections[i.connection].reactor in rerun for i in reaction.inputs()):
            # (a rerun after a death forwards its results to reactors by name, not to a pool's members)
            return [f"{pool.name}: the pooled call reads a result of a call that may be run again"]
    relayed = {(c.producer, c.ret) for c in plan.connections if c.source == "relay"}
    retried = {r.name for r, info in _actor_infos(plan, trace) if info is not None and info.max_task_retries}
    for c in plan.connections:
        if c.source == "relay" and any(u.passing != "value" for u in c.uses):
            return [f"c{c.id}: a ref reaching back a varying number of periods passed nested or read"]
        if c.source == "relay" and any(u.reactor.startswith("task:") or u.reactor in retried for u in c.uses):
            # (a rerun after a death sends the invocation again, not the value relayed before it)
            return [f"c{c.id}: a ref reaching back a varying number of periods passed to a call that may be "
                    "run again"]
        if c.source == "period" and c.uses and ((c.producer, c.ret) in relayed
                                                or plan.reactions[c.producer].reactor.startswith("pool:")):
            return [f"c{c.id}: a result of a loop in completion order also read at a fixed distance"]
    return []




def _returns(plan):
    reasons = []
    for q, expect in enumerate(plan.guard.expects):
        sig = expect.signature
        nret = sig[3] if expect.members else sig[4] if len(sig) > 4 else None   # (a pool's leaves the actor out)
        if sig[0] == "Submit" and (not isinstance(nret, int) or nret < 0):
            reasons.append(f"position {q}: num_returns={nret!r} is not a fixed count")
    return reasons


def _lags(plan, max_lag):
    return [f"c{c.id} is read {max(u.lag for u in c.uses)} periods after it is written (max_lag {max_lag})"
            for c in plan.connections if c.uses and max(u.lag for u in c.uses) > max_lag]


def _tasks(plan, trace):
    for reaction in plan.reactions:
        if reaction.op != "task":
            continue
        where = f"position {reaction.position}"
        extra = sorted(trace.task_options.get(reaction.target, frozenset()) - REPLAYED_TASK_OPTIONS)
        if extra:
            return [f"{where}: a task with options {', '.join(extra)} (only num_returns, max_retries and name "
                    "are replayed)"]
    return []


def _nested_refs(plan):
    # Refs nested in a call's arguments, and in a put's value read by calls (each call's worker is lent them)
    # or by the driver, are replayed (core.replay_nested).  A put's ref passed on nested, or read across
    # blocks or periods of a completion-order loop (a relay), would reach a worker without the loan.
    nesting = {r.outputs[0]: r.position for r in plan.reactions if r.op == "put" and r.reads}
    for c in plan.connections:
        if c.id in nesting and any(u.passing == "ref" for u in c.uses):
            return [f"position {nesting[c.id]}: a put nesting refs, its own ref passed nested in an argument"]
        if c.source == "relay" and c.producer in nesting.values():
            return [f"position {c.producer}: a put nesting refs, read in another period of a loop in "
                    "completion order"]
    return []
