"""Completion-order loops: a period that repeats once actors are taken by class (pure, as ``infer``).

A loop that waits for whichever result is ready and hands the next call to the actor that made it (an
asynchronous parameter server, Ape-X's rollout workers, ``ActorPool.map_unordered``) has no fixed period:
the actor called at a position, and how many periods back a ref reaches, follow the order in which calls
finish.  Taken by class, with a ref matched by the position of the period that made it rather than by
its distance, the same trace repeats:

    wait(g_a, g_b, g_c, g_d)  ->  ps.apply(g_b)  ->  DataWorker#b.compute(w)      period 1
    wait(g_a, g_c, g_d, g_b)  ->  ps.apply(g_d)  ->  DataWorker#d.compute(w)      period 2
             \\ refs to position 2, a varying number of periods back \\ a member of the pool

``find_pooled`` finds such a pattern and returns it as plain data; ``infer.infer_pooled`` makes its plan, in
which the pooled position runs on whichever member the script calls and each ref that reaches back a varying
number of periods is relayed by the driver (which holds the result: the script waited on it).  The reactor
layer looks for one only when ``infer`` found no fixed period, among the calls alone; a pattern whose plan it
cannot run is described in ``explain()`` with ``PooledPattern.reason()``.  A fixed but uneven schedule over
actors of one class (a, b, b, a, b) can look like such a loop for a while: its pooled plan runs it correctly.
"""

from __future__ import annotations

from dataclasses import dataclass

from .record import ACTOR_METHOD, ActorKill, Submit, Trace, ref_slots, signature

CONSTANT, RELATIVE, VARYING = "constant", "relative", "varying"


@dataclass(frozen=True)
class Pool:
    position: int
    class_name: str
    method: str
    members: tuple          # the actors called at this position over the region, first call first


@dataclass(frozen=True)
class PooledPattern:
    length: int
    start: int              # absolute index of the region's first event
    end: int
    pools: tuple            # of Pool: positions whose actor varies within one class
    varying: tuple          # of (position, slot, producing position): refs reaching back a varying distance
    modes: tuple = ()       # per position, per ref slot: CONSTANT, RELATIVE or VARYING

    @property
    def repeats(self) -> int:
        return (self.end - self.start) // self.length

    def describe(self) -> str:
        """The same words for every sighting of one loop (``explain()`` counts refusals by their reason)."""
        pools = ", ".join(f"whichever of {len(p.members)} {p.class_name} actors is free gets "
                          f"{p.class_name}.{p.method}" for p in self.pools)
        return (f"a loop in completion order (period {self.length}; refs reach back a varying number of periods"
                + (f"; {pools}" if pools else "") + ")")

    def reason(self, blockers=()) -> str:
        """Why it does not replay: ``blockers`` of its plan, or that its reads are in completion order too."""
        why = "; ".join(blockers) if blockers else "its reads follow no fixed pattern either"
        return f"{self.describe()}: not replayed ({why})"


MAX_LENGTH = 64           # completion-order periods are a few events (a wait, a call or two)
MAX_WINDOW = 1024         # events searched: the work stays under MAX_LENGTH * MAX_WINDOW comparisons


def find_pooled(trace: Trace, repeats: int = 2, window: int | None = MAX_WINDOW,
                rotations: frozenset = frozenset(), exclude: frozenset = frozenset(),
                length: int | None = None) -> PooledPattern | None:
    """The shortest completion-order pattern over the end of ``trace``, or None.  Its region holds at least
    ``repeats`` periods for each member of its largest pool, and at least one ref reached back a different
    number of periods from one period to the next, or a pool's actors were called in no fixed rotation.  A fixed but uneven schedule over actors of one class
    can look like this for a while: the caller takes the pattern as a description, not a verdict.
    ``rotations``: methods whose pools count even where their actors happen to rotate (the caller saw such a
    rotation break).  ``exclude``: actors that are no members (dead ones: a pool names the actors it may call).
    ``length``: that period only, taken even if nothing varies in it (``infer_blocks`` lays its calls out in a
    period whose order varies by construction)."""
    window = MAX_WINDOW if window is None else min(window, MAX_WINDOW)
    events = trace.events[-window:]
    base = trace.first_index + len(trace.events) - len(events)
    n = len(events)
    sigs = [_pooled_signature(e, trace) for e in events]
    refs = [ref_slots(e) for e in events]
    lengths = range(1, min(MAX_LENGTH, n // (2 * repeats)) + 1) if length is None else (length,)
    laid_out = length is not None
    for length in lengths:
        found = _region(sigs, refs, base, length)
        if found is None:
            continue
        start, modes, varied = found
        if not any(type(events[start + q]) is Submit for q in range(length)):
            continue
        pools = _pools(trace, events, start, n, length, exclude)
        if not varied and not laid_out and not any(
                p.method in rotations or _irregular(events, start + p.position, n, length) for p in pools):
            if start == 0:
                return None     # the whole window repeats every ``length`` events and nothing varies
            continue
        varying = tuple((q, j, (q - modes[(start + q) % length][j][1]) % length)
                        for q in range(length) for j in range(len(modes[(start + q) % length]))
                        if ((start + q) % length, j) in varied)
        widest = max((len(p.members) for p in pools), default=1)
        if (n - start) // length < repeats * max(2, widest):
            continue
        modes_at = tuple(tuple(m for m, _ in modes[(start + q) % length]) for q in range(length))
        return PooledPattern(length, base + start, base + n, pools, varying, modes_at)
    return None


def _pooled_signature(event, trace):
    sig = signature(event)
    if type(event) is Submit and event.kind == ACTOR_METHOD:
        info = trace.actors.get(event.actor)
        if info is not None and not info.concurrent:
            return sig[:2] + (("pool", info.class_key),) + sig[3:]
    return sig


def _region(sigs, refs, base, length):
    """(first list index of the maximal suffix that repeats every ``length`` events, ref modes by index %
    length, the (index % length, slot) pairs whose distance changed between two periods), or None if the
    suffix holds fewer than two periods."""
    n = len(sigs)
    start, modes, varied = _walk(sigs, refs, base, length, 0)
    if start is None:
        return None
    for t in range(n - length, n):           # a constant must exist before the region reads it
        for ref, (mode, _) in zip(refs[t], modes[t % length]):
            if mode == CONSTANT and ref.producer >= base + start:
                start = ref.producer - base + 1
    if n - start < 2 * length:
        return None
    start, modes, varied = _walk(sigs, refs, base, length, start)    # the modes of the region kept
    return None if start is None else (start, modes, varied)


def _walk(sigs, refs, base, length, floor):
    n = len(sigs)
    modes = [None] * length
    varied = set()
    t = n - 1 - length
    while t >= floor:
        u = t + length
        if sigs[t] != sigs[u]:
            break
        seen = _ref_modes(refs[t], refs[u], base + t, base + u, length)
        if seen is None:
            break
        known = modes[t % length]
        merged = seen if known is None else _merge(known, seen)
        if merged is None:
            break
        modes[t % length] = merged
        varied.update((t % length, j) for j, (mode, _) in enumerate(seen) if mode == VARYING)
        t -= 1
    start = t + 1
    if n - start < 2 * length:
        return None, None, None
    return start, modes, varied


def _ref_modes(a_refs, b_refs, a_index, b_index, length):
    """Per ref slot, (mode, the position that made the ref, counted back from the reader modulo ``length``)."""
    modes = []
    for a, b in zip(a_refs, b_refs):
        if a.ret != b.ret:
            return None
        if a.producer == b.producer:
            modes.append((CONSTANT, (a_index - a.producer) % length if a.producer >= 0 else None))
        elif a.producer < 0 or b.producer < 0:
            return None
        elif (a_index - a.producer) % length != (b_index - b.producer) % length:
            return None
        else:
            mode = RELATIVE if a_index - a.producer == b_index - b.producer else VARYING
            modes.append((mode, (a_index - a.producer) % length))
    return tuple(modes)


def _merge(known, seen):
    """One slot's modes over the region: a ref still in flight reads as a constant for a while (the same
    result waited on again), then as varying: both are one varying ref if the same position made them."""
    merged = []
    for (k, k_at), (s, s_at) in zip(known, seen):
        if k == s and k_at == s_at:
            merged.append((k, k_at))
        elif k_at is None or k_at != s_at:
            return None
        else:
            merged.append((VARYING, k_at))
    return tuple(merged)


def _irregular(events, first, n, length):
    """Whether the actors called at every ``length``-th event from ``first`` follow no rotation of at most
    ``MAX_LENGTH`` calls over the region (then the actor follows completion order, as ``ActorPool``'s
    ``map_unordered`` calls whichever is free, though no ref varies)."""
    called = [events[t].actor for t in range(first, n, length)]
    return not any(all(called[i] == called[i + p] for i in range(len(called) - p))
                   for p in range(1, min(MAX_LENGTH, len(called) // 2) + 1))


def _pools(trace, events, start, n, length, exclude=frozenset()):
    pools = []
    for q in range(length):
        at = [events[t] for t in range(start + q, n, length)]
        first = at[0]
        if type(first) is not Submit or first.kind != ACTOR_METHOD:
            continue
        # Also the actors of its class given the same call before the region (the loop's first round, made
        # before it began): their results are still to be passed on when the loop replays.
        info = trace.actors.get(first.actor)
        if info is None:
            continue                    # (created before recording: not pooled, see _pooled_signature)
        cls = info.class_key
        killed = {e.actor for e in events if type(e) is ActorKill} | exclude
        same = [e.actor for e in events[:start] if type(e) is Submit and e.kind == ACTOR_METHOD
                and e.target == first.target and getattr(trace.actors.get(e.actor), "class_key", None) == cls
                and e.actor not in killed]
        members = tuple(a for a in dict.fromkeys([e.actor for e in at] + same) if a not in exclude)
        if len(members) > 1:
            pools.append(Pool(q, str(cls), str(first.target), members))
    return tuple(pools)
