"""Infer: from a recorded ``Trace`` to a ``Plan`` (pure; no processes, no values).

Algorithm
---------
1. *Period.*  Two events match when their ``record.signature`` is equal and
   each of their refs matches in one of two ways: *relative* (both produced the
   same number of events earlier: a loop-carried or same-period flow) or
   *constant* (the very same producer: a value made once before the loop).
   For P = 1, 2, ... we walk back from the end of the trace while event t
   matches event t + P, requiring every position of the period to keep the
   same way of matching each ref.  Where the walk stops, the periodic region
   begins; it is moved later if needed so that every constant is made before
   it.  The first P whose region holds ``repeats`` full periods and at least
   one call wins (so the shortest).  Events before the region are the prefix;
   the trace may end mid-period (the tail).  Actor creation and kill never
   match, so a period never contains them.  A relative ref must name a
   position of the period that makes such a return, or P is rejected.
2. *Loop head.*  The period is rotated so that position 0 is the cut with the
   fewest values in flight (``in_flight``), preferring a cut right after a get
   or wait: then lags > 0 are real loop-carried flows, and a gather barrier
   loop starts at its first call.
3. *Graph.*  Reactors: the driver, one per actor called in the period, and
   task slots (the period's task calls are dealt round-robin over
   ``task_slots`` slots, so one call site's fan-out spreads out).  Every output
   of a call or put in the period is a connection; every ref read is a ``Use``
   of one, with its lag in periods.  A constant ref becomes a ``prefix`` (or
   ``external``) connection.
4. *Schedule.*  Each reactor runs its reactions in trace order (deadlock-free:
   every reaction waits only on earlier ones).  A connection needs ``capacity``
   = max over uses of lag (+1 unless the reader comes before the writer in
   the period) tokens so that no write waits on a later read.
5. *Switch point.*  ``Plan.switch`` is the position where starting replay
   needs the fewest in-flight values seeded from dynamic mode (a gather
   barrier loop needs none), soonest after the trace's end among ties.

Cost: O(n) signatures plus, per candidate P, a walk that usually stops at its
first comparison; ~30 ms for a period of 1,000 task calls.  Call ``infer``
after a get or wait while recording (a period then ends at a barrier rather
than in the middle of a fan-out), or after a stretch of calls with no barrier
at all (refs passed from call to call), with ``window`` bounding long traces.

What the replay phase needs from the Plan (and from the runtime)
----------------------------------------------------------------
- Refuse a plan with ``blockers``: ``infer`` asks core.admission, the one place
  that decides whether a pattern may replay.
- Keep recording after inference and ``plan.guard.check`` each new event while
  still dynamic; switch when the next event's position is ``plan.switch``.
  First drain the dynamic runtime's calls to the plan's actors (per-caller
  order), then write ``plan.seeds(first_index)`` into their connections in
  list order, taking each value from the dynamic runtime by
  ``trace.ref_id(seed.producer, seed.ret)``.  Seeds of ``prefix`` and
  ``external`` connections are constants: written once, never replaced.
- Wiring: one worker per actor reactor (the actor's own process), one task
  worker per ``task:k`` reactor; one invocation channel from the driver to
  each (the literal arguments of each scheduled reaction, in schedule order);
  one buffer per connection holding at least ``capacity`` tokens, written by
  ``connection.reactor``, read by each distinct ``use.reactor``: one write per
  token whatever the number of readers.  Only ``to_driver`` connections need
  to reach the driver; ``actor_only`` ones never do.
- Worker loop, per period, for each position in ``reactor.schedule``: read the
  invocation; for each ``ArgSpec`` take the literal, or the token of
  ``input.connection`` written ``input.lag`` periods back ('value': pass the
  value; 'ref': pass a ref the callee can resolve, so such a value must also be
  reachable through the object store); run; write one token per ``outputs``
  entry (an error token if the call raised, so readers raise as in dynamic
  mode).  A token is free once every use has read it.  Calls a worker itself
  makes stay dynamic.
- Driver: the API call at absolute index i is position ``plan.position(i)``;
  ``guard.check`` it (needs the event in record form: the runtime must pass
  the recorder the same target/actor keys it passed during recording); a call
  writes its invocation and returns refs that remember (i, ret) so later
  guard checks can measure distances; put writes its connection; get reads
  ``reaction.reads``; wait only observes them.
- A token's slot is reused ``capacity`` periods later: if the script still
  holds its ref, copy it out or deoptimize first.  On deoptimization every
  token written and not yet handed over becomes a dynamic object under the ref
  id the driver gave out for (index, ret); the trace keeps counting indices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import admission
from .plan import (ANY_POSITION, DRIVER, ArgSpec, Connection, Expect, Guard, Input, Plan, Pool, Reaction, Reactor,
                   RefCheck, Use, key_text)
from .record import ACTOR_METHOD, Literal, RefArg, Submit, Trace, produces, ref_slots, signature

DEFAULT_REPEATS = 3
DEFAULT_MAX_LAG = 16


@dataclass(frozen=True)
class Period:
    length: int
    start: int                 # absolute index of position 0
    end: int                   # absolute index one past the trace
    relative: tuple            # per position, per ref slot: True relative, False constant

    @property
    def repeats(self) -> int:
        return (self.end - self.start) // self.length


def infer(trace: Trace, repeats: int = DEFAULT_REPEATS, task_slots: int = 1,
          max_period: int | None = None, window: int | None = None, max_lag: int = DEFAULT_MAX_LAG,
          min_period: int = 1) -> Plan | None:
    """The plan of the shortest period (of at least ``min_period`` events) repeated ``repeats`` times at
    the end of ``trace``, or None if there is none.  ``window`` bounds the work to the last events of a
    long trace (the region found then starts within it).  A value read more than ``max_lag`` periods after
    it is made blocks the plan (its buffers would hold that many tokens)."""
    period = find_period(trace, repeats, max_period, window, min_period)
    if period is None:
        return None
    plan = build_plan(trace, period, task_slots)
    return dataclasses.replace(plan, blockers=admission.blockers(plan, trace, max_lag))


def find_period(trace: Trace, repeats: int = DEFAULT_REPEATS, max_period: int | None = None,
                window: int | None = None, min_period: int = 1) -> Period | None:
    if repeats < 2:
        raise ValueError("repeats must be at least 2")
    events = trace.events if window is None else trace.events[-window:]
    base = trace.first_index + len(trace.events) - len(events)
    n = len(events)
    sigs = [signature(e) for e in events]
    refs = [ref_slots(e) for e in events]
    longest = n // repeats if max_period is None else min(max_period, n // repeats)
    # A period holds a call, and the last ``length`` events are one whole period: lengths whose last events
    # hold no call are skipped before the O(n) region walk (a long run of puts or gets would make every
    # length match the whole window, and the search quadratic).
    last_submit = max((t for t in range(n) if type(events[t]) is Submit), default=-1)
    for length in range(max(1, min_period, n - last_submit), longest + 1):
        found = _region(sigs, refs, base, length)
        if found is None:
            continue
        start, modes = found
        if n - start < repeats * length:
            continue
        if not any(type(events[t]) is Submit for t in range(start, start + length)):
            continue
        relative = tuple(modes[(start + q) % length] for q in range(length))
        if _producers_exist(events, refs, base, start, relative):
            return Period(length, base + start, base + n, relative)
    return None


def _region(sigs, refs, base, length):
    """(first list index of the maximal periodic suffix, ref modes by index % length)."""
    n = len(sigs)
    modes = [None] * length
    t = n - 1 - length
    while t >= 0:
        u = t + length
        if sigs[t] != sigs[u]:
            break
        mode = _ref_modes(refs[t], refs[u], base + t, base + u)
        if mode is None:
            break
        known = modes[t % length]
        if known is None:
            modes[t % length] = mode
        elif known != mode:
            break
        t -= 1
    start = t + 1
    if n - start < 2 * length:
        return None
    # A constant must exist before the first period that reads it.
    for t in range(n - length, n):
        for ref, rel in zip(refs[t], modes[t % length]):
            if not rel and ref.producer >= base + start:
                start = ref.producer - base + 1
    return start, modes


def _ref_modes(a_refs, b_refs, a_index, b_index):
    modes = []
    for a, b in zip(a_refs, b_refs):
        if a.ret != b.ret:
            return None
        if a.producer == b.producer:
            modes.append(False)
        elif a.producer >= 0 and b.producer >= 0 and a_index - a.producer == b_index - b.producer:
            modes.append(True)
        else:
            return None
    return tuple(modes)


def _producers_exist(events, refs, base, start, relative):
    """Every relative ref must name a position of the period that makes enough returns, and the region must
    show that position's value read at least once (a call reading values made before the region, each as
    far back, is no loop-carried flow: five calls reading five earlier results look like one)."""
    length = len(relative)
    last_period = start + ((len(events) - start) // length - 1) * length
    for q in range(length):
        for ref, rel, last in zip(refs[start + q], relative[q], refs[last_period + q]):
            if rel:
                p = (q - (base + start + q - ref.producer)) % length
                if produces(events[start + p]) <= ref.ret or last.producer < base + start:
                    return False
    return True


def build_plan(trace: Trace, period: Period, task_slots: int = 1) -> Plan:
    """Assemble the plan, rotated so position 0 is the cut with the fewest
    values in flight, preferring one right after a get or wait (the loop head:
    lags are then only real loop-carried flows)."""
    plan = _assemble(trace, period, task_slots)
    crossing = in_flight(plan)
    after_barrier = lambda q: plan.reactions[q - 1].op not in ("get", "wait")
    head = min(range(period.length), key=lambda q: (crossing[q], after_barrier(q), q))
    if head:
        turned = tuple(period.relative[(q + head) % period.length] for q in range(period.length))
        plan = _assemble(trace, Period(period.length, period.start + head, period.end, turned), task_slots)
        crossing = in_flight(plan)
    switch = min(range(plan.period), key=lambda q: (crossing[q], (q - plan.phase) % plan.period))
    return dataclasses.replace(plan, switch=switch)


def infer_pooled(trace: Trace, pattern, task_slots: int = 1, max_lag: int = DEFAULT_MAX_LAG,
                 any_relays: frozenset = frozenset()) -> Plan:
    """The plan of a loop in completion order (``infer_pools.PooledPattern``): a pooled position runs on
    whichever member the script calls, and a ref that reaches back a varying number of periods is relayed
    by the driver, which holds every such result (the script waits on them).  ``any_relays``: (position, ref
    slot) pairs relayed from whatever value the driver holds (``plan.ANY_POSITION``).  Blockers say what of it
    this replay does not run."""
    from .infer_pools import VARYING
    length = pattern.length
    last = pattern.start + (pattern.repeats - 1) * length       # a period whose refs all lie in the region
    relative, varying = [], {}
    for q in range(length):
        ev = trace.event(last + q)
        slots = []
        for j, (ref, mode) in enumerate(zip(ref_slots(ev), pattern.modes[q])):
            if (q, j) in any_relays:
                varying[(q, j)] = ANY_POSITION
            elif mode == VARYING:
                varying[(q, j)] = (q - (last + q - ref.producer)) % length
            slots.append(ref.producer != _constant_producer(trace, pattern, q, j))
        relative.append(tuple(slots))
    pools = {p.position: (f"pool:{p.class_name}:{p.position}", p.members) for p in pattern.pools}
    plan = _assemble(trace, Period(length, pattern.start, pattern.end, tuple(relative)), task_slots,
                     pools, varying)
    crossing = in_flight(plan)
    switch = min(range(plan.period), key=lambda q: (crossing[q], (q - plan.phase) % plan.period))
    plan = dataclasses.replace(plan, switch=switch)
    return dataclasses.replace(plan, blockers=admission.blockers(plan, trace, max_lag))


def _constant_producer(trace, pattern, q, j):
    """The producer a constant slot names in every period (None if the slot is not constant)."""
    from .infer_pools import CONSTANT
    if pattern.modes[q][j] != CONSTANT:
        return None
    return ref_slots(trace.event(pattern.start + q))[j].producer


def in_flight(plan: Plan) -> list[int]:
    """For each position q: how many values made in the period are written
    before a cut just before q and read after it (what replay starting at q
    must seed, besides constants).  A token written at position p and last read
    d events later crosses the cuts at p+1 .. p+d, counted modulo the period."""
    length = plan.period
    counts = [0] * (length + 1)                   # a difference array over positions
    for conn in plan.connections:
        if conn.source != "period" or not conn.uses:
            continue
        laps, rest = divmod(max(plan.distance(conn, u) for u in conn.uses), length)
        counts[0] += laps
        counts[length] -= laps
        first = (conn.producer + 1) % length
        for lo, hi in ((first, min(first + rest, length)), (0, max(0, first + rest - length))):
            counts[lo] += 1
            counts[hi] -= 1
    total, out = 0, []
    for q in range(length):
        total += counts[q]
        out.append(total)
    return out


def _assemble(trace: Trace, period: Period, task_slots: int, pools=None, varying=None) -> Plan:
    """``pools``: position -> (pool name, the actor ids of its members); ``varying``: (position, ref slot) -> the
    position whose output it reads, any number of periods back (a relay connection each)."""
    length, start = period.length, period.start
    template = [trace.event(start + q) for q in range(length)]
    placed = _place(template, task_slots)
    pools, varying = pools or {}, varying or {}
    for q, (name, _) in pools.items():
        placed[q] = name
    conns: dict = {}                                  # key -> [id, source, producer, ret, reactor, uses]
    for q, ev in enumerate(template):
        for ret in range(produces(ev)):
            conns[("period", q, ret)] = [len(conns), "period", q, ret, placed[q], []]

    def read(q, j, ref, passing):
        if (q, j) in varying:
            key = ("relay", q, j)
            conns[key] = [len(conns), "relay", varying[(q, j)], ref.ret, DRIVER, []]
            lag = 0
        elif period.relative[q][j]:
            distance = start + q - ref.producer
            p = (q - distance) % length
            lag = (distance - (q - p)) // length
            key = ("period", p, ref.ret)
        else:
            lag = 0
            key = ("prefix", ref.producer, ref.ret) if ref.producer >= 0 else ("external", -1 - ref.producer, 0)
            if key not in conns:
                conns[key] = [len(conns), key[0], key[1], key[2], DRIVER, []]
        conn = conns[key]
        conn[5].append(Use(q, placed[q], lag, passing))
        return Input(conn[0], lag, passing)

    reactions = []
    for q, ev in enumerate(template):
        if type(ev) is Submit:
            args = _arg_specs(ev, lambda j, ref, passing: read(q, j, ref, passing))
            outputs = tuple(conns[("period", q, r)][0] for r in range(produces(ev)))
            reactions.append(Reaction(q, placed[q], ev.kind, key_text(ev.target), ev.call_site, args, (), outputs))
        else:
            op = type(ev).__name__.lower()
            passing = {"get": "get", "wait": "wait"}.get(op, "ref")
            reads = tuple(read(q, j, ref, passing) for j, ref in enumerate(ref_slots(ev)))
            outputs = (conns[("period", q, 0)][0],) if op == "put" else ()
            reactions.append(Reaction(q, DRIVER, op, "", ev.call_site, (), reads, outputs))

    connections = tuple(_connection(*c) for c in sorted(conns.values()))
    reactors = _reactors(trace, template, placed, pools)
    guard = Guard(length, start, tuple(_expect(ev, start + q, period.relative[q], pools.get(q), varying, q)
                                       for q, ev in enumerate(template)))
    return Plan(length, start, period.end, period.repeats, 0, reactors, tuple(reactions), connections, guard,
                pools=tuple(Pool(q, name, tuple(f"actor:{key_text(a)}" for a in members))
                            for q, (name, members) in sorted(pools.items())))


def _place(template, task_slots):
    """The reactor of each position."""
    placed, tasks = [], 0
    for ev in template:
        if type(ev) is not Submit:
            placed.append(DRIVER)
        elif ev.kind == ACTOR_METHOD:
            placed.append(f"actor:{key_text(ev.actor)}")
        else:
            placed.append(f"task:{tasks % max(1, task_slots)}")
            tasks += 1
    return placed


def _arg_specs(ev, read):
    """ArgSpecs in ``ref_slots`` order: direct refs first, then nested ones."""
    named = list(enumerate(ev.args)) + list(ev.kwargs)
    j = 0
    direct = []
    for name, arg in named:
        if type(arg) is RefArg:
            direct.append(read(j, arg, "value"))
            j += 1
        else:
            direct.append(None)
    specs = []
    for (name, arg), inp in zip(named, direct):
        nested = ()
        if type(arg) is Literal and arg.nested:
            nested = tuple(read(j + i, ref, "ref") for i, ref in enumerate(arg.nested))
            j += len(arg.nested)
        specs.append(ArgSpec(name, inp, nested))
    return tuple(specs)


def _connection(cid, source, producer, ret, reactor, uses):
    if source == "period":
        # A reaction reading its own position's older token still holds it while it writes.
        capacity = max([u.lag + (u.position >= producer) for u in uses], default=1)
    else:
        capacity = 1
    to_driver = any(u.passing in ("get", "wait", "ref") for u in uses)    # (a nested ref: through the driver)
    actor_only = reactor != DRIVER and bool(uses) and not to_driver and all(u.reactor != DRIVER for u in uses)
    return Connection(cid, source, producer, ret, reactor, tuple(uses), max(1, capacity), to_driver, actor_only)


def _reactors(trace, template, placed, pools):
    order = [DRIVER] + list(dict.fromkeys(p for p in placed if p.startswith("actor:")))
    actor_of = {placed[q]: ev.actor for q, ev in enumerate(template) if placed[q].startswith("actor:")}
    pooled_at = {}                  # a pool member's reactor name -> the pooled positions it serves
    for q, (_, members) in pools.items():
        for a in members:
            name = f"actor:{key_text(a)}"
            actor_of.setdefault(name, a)
            pooled_at.setdefault(name, set()).add(q)
            if name not in order:
                order.append(name)
    order += sorted(set(p for p in placed if p.startswith("task:")), key=lambda name: int(name[5:]))
    reactors = []
    for name in order:
        if name == DRIVER:
            reactors.append(Reactor(name, "driver", None, None, False, tuple(range(len(template)))))
            continue
        schedule = tuple(q for q, p in enumerate(placed) if p == name)
        if name in pooled_at:
            schedule = tuple(sorted(set(schedule) | pooled_at[name]))
        if name.startswith("task:"):
            reactors.append(Reactor(name, "task", None, None, False, schedule))
            continue
        actor = actor_of[name]
        info = trace.actors.get(actor)
        reactors.append(Reactor(name, "actor", key_text(actor), None if info is None else key_text(info.class_key),
                                bool(info and info.concurrent), schedule))
    return tuple(reactors)


def _expect(ev, index, relative, pool=None, varying=None, q=None):
    checks = tuple(RefCheck(True, varying[(q, j)], ref.ret, varying=True) if varying and (q, j) in varying
                   else RefCheck(rel, index - ref.producer if rel else ref.producer, ref.ret)
                   for j, (ref, rel) in enumerate(zip(ref_slots(ev), relative)))
    if pool is None:
        return Expect(signature(ev), checks)
    sig = signature(ev)
    return Expect(sig[:2] + sig[3:], checks, tuple(pool[1]))
