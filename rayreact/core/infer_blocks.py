"""Loops whose call sites run in no fixed order: blocks of calls, in whatever order the script picks (pure).

Ape-X's driver waits for whichever call finished and, by what finished, starts an explorer's next chunk or
the learner's next step, and now and then asks the learner for its weights:

    L L L E L L W L E E L ...        L = sample -> train,  E = explore(weights),  W = get_weights

No period repeats, not even with actors taken by class (``infer_pools``), yet every call belongs to a
*block*: calls that always come together, in one order (sample is always followed by train; train by
anything).  Laid out in a period that holds each block once, in the order the blocks first appeared, the
calls repeat, with some blocks skipped in some periods:

    period:    [E][L L][W]           virtual index = region start + k * length + block offset + j
    calls:     [ ][L L][ ]  [ ][L L][ ]  [ ][L L][W]  [E][L L][ ]  ...

``find_blocks`` finds the blocks; ``lay_out`` renumbers the calls so, filling each skipped block with a
*placeholder* (a copy of the block's nearest instance, with refs read inside the block moved along and no
results: ``ref_ids`` of None). The layout is then a loop in completion order that
``infer_pools.find_pooled`` and ``infer.infer_pooled`` take as they stand. A ref read inside its block keeps
a fixed distance there; a ref from another block (or from before the loop) may name whatever the script
holds, and is relayed by the driver from any value it has (``plan.ANY_POSITION``: an explorer is given the
weights the learner made last, or those made before the recording began). The plan's ``blocks`` tell the
driver where a block may begin: a call that begins another block skips the positions between (no worker is
told of them, and no ref can name what they would have made).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, replace

from .infer import infer_pooled
from .infer_pools import MAX_LENGTH, MAX_WINDOW, _pooled_signature, find_pooled
from .plan import DRIVER, Plan, Use
from .record import ACTOR_METHOD, Literal, RefArg, Submit, Trace, ref_slots

MAX_BLOCKS = 16


@dataclass(frozen=True)
class Blocks:
    start: int              # the calls' index (``Trace.without_reads`` numbering) of the region's first call
    end: int                # one past its last
    blocks: tuple           # per block, the signatures of its calls, in order
    offsets: tuple          # per block, its first position in the laid-out period

    @property
    def length(self) -> int:
        return sum(len(b) for b in self.blocks)

    def describe(self) -> str:
        return (f"a loop of {len(self.blocks)} blocks of calls taken in any order "
                f"({' | '.join(', '.join(str(s[3]) for s in b) for b in self.blocks)})")


def find_blocks(calls: Trace, window: int | None = MAX_WINDOW) -> Blocks | None:
    """The blocks of the actor calls that end ``calls`` (a trace without reads), or None: fewer than two blocks,
    a call that is no plain actor call among them (a task, a put, an actor's creation), or calls that end in the
    middle of a block (the loop is looked for again after the next read)."""
    window = MAX_WINDOW if window is None else min(window, MAX_WINDOW)
    events = calls.events[-window:]
    base = calls.first_index + len(calls.events) - len(events)
    lo = 0
    for k, e in enumerate(events):
        if type(e) is not Submit or e.kind != ACTOR_METHOD:
            lo = k + 1
    sigs = [_pooled_signature(e, calls) for e in events]
    counts = collections.Counter(sigs[lo:])
    if len(counts) > 4 * MAX_BLOCKS:
        return None
    # A call made once, first (the loop's first call, a warm-up's), is no block of the loop.
    while lo < len(events) and counts[sigs[lo]] < 2:
        counts[sigs[lo]] -= 1
        lo += 1
    region = sigs[lo:]
    if len(region) < 4:
        return None
    after, before = collections.defaultdict(set), collections.defaultdict(set)
    for a, b in zip(region, region[1:]):
        after[a].add(b)
        before[b].add(a)

    def continues(b):
        """The call ``b`` always follows (its block's previous), or None."""
        (a,) = before[b] if len(before[b]) == 1 else (None,)
        return a if a is not None and a != b and after[a] == {b} else None

    if after[region[-1]] and continues(next(iter(after[region[-1]]))) == region[-1]:
        return None                     # the calls end inside a block
    while lo < len(events) and continues(sigs[lo]) is not None:
        lo += 1                         # (begin at a block's first call)
    region = sigs[lo:]
    heads = list(dict.fromkeys(s for s in region if continues(s) is None))
    if not 2 <= len(heads) <= MAX_BLOCKS or any(counts[h] < 2 for h in heads):
        return None                     # (a block seen once is no block the loop takes again and again)
    blocks, offsets, length = [], [], 0
    for head in heads:
        block = [head]
        while len(after[block[-1]]) == 1:
            (b,) = after[block[-1]]
            if continues(b) != block[-1] or b in block:
                break
            block.append(b)
        blocks.append(tuple(block))
        offsets.append(length)
        length += len(block)
    if length > MAX_LENGTH:
        return None
    found = Blocks(base + lo, base + len(events), tuple(blocks), tuple(offsets))
    return found if _instances(found, region) is not None else None


def _instances(found: Blocks, sigs) -> list | None:
    """(period, block) of each block instance in order, or None if the calls are no sequence of the blocks."""
    first = {b[0]: k for k, b in enumerate(found.blocks)}
    out, t, period, last = [], 0, 0, -1
    while t < len(sigs):
        k = first.get(sigs[t])
        block = found.blocks[k] if k is not None else ()
        if k is None or tuple(sigs[t:t + len(block)]) != block:
            return None
        if k <= last:
            period += 1
        out.append((period, k))
        last = k
        t += len(block)
    return out


def lay_out(calls: Trace, found: Blocks) -> tuple[Trace, frozenset, frozenset]:
    """(``calls`` renumbered so, the indices of its placeholders, the offsets in the period of the calls whose
    results are read across blocks): the calls before the region as they were, the
    region's laid out from its start (every period has each block once; a block the script skipped there is a
    placeholder).  Its ``first_index + len(events)`` is where replay begins: the next period's first block, or
    the rest of the last period.  A ref read inside its block keeps its producer (moved along in a
    placeholder); every other ref names one *cross* external ref, the last of ``externals`` (None): whatever
    value the driver holds may stand there, so the region's periods compare equal whatever was passed."""
    first = calls.first_index
    region = calls.events[found.start - first:found.end - first]
    sigs = [_pooled_signature(e, calls) for e in region]
    instances = _instances(found, sigs)
    length = found.length
    cross = RefArg(-1 - len(calls.externals), 0)
    virtual = {}                        # a region call's index -> its index laid out
    placed = {}                         # laid-out index of an instance's first call -> (block, its calls)
    t = 0
    for period, k in instances:
        at = found.start + period * length + found.offsets[k]
        calls_of = region[t:t + len(found.blocks[k])]
        for j, e in enumerate(calls_of):
            virtual[e.index] = at + j
        placed[at] = (k, calls_of)
        t += len(calls_of)
    end = max(virtual.values()) + 1

    crossed = set()

    def renamed(e, index, at, size, shift=None):
        """``e`` at ``index``, in the block instance at ``at`` of ``size`` calls: refs read inside it moved by
        ``shift`` (a placeholder's, which makes nothing), every other ref the cross one."""
        def ref(r):
            moved = virtual.get(r.producer, -1) + (shift or 0) if r.producer >= found.start else -1
            if at <= moved < at + size:
                return RefArg(moved, r.ret)
            if moved >= 0 and shift is None:
                crossed.add((moved - found.start) % length)
            return cross

        def arg(a):
            if type(a) is RefArg:
                return ref(a)
            return Literal(a.type_name, tuple(ref(r) for r in a.nested)) if a.nested else a

        return replace(e, index=index, args=tuple(arg(a) for a in e.args),
                       kwargs=tuple((name, arg(v)) for name, v in e.kwargs),
                       ref_ids=e.ref_ids if shift is None else (None,) * len(e.ref_ids))

    timed = len(calls.times) == len(calls.events)
    times = list(calls.times[:found.start - first]) if timed else []
    real_times = dict(zip((e.index for e in calls.events), calls.times)) if timed else {}
    out = list(calls.events[:found.start - first])
    first_instance = {}
    for at, (k, calls_of) in sorted(placed.items()):
        first_instance.setdefault(k, (at, calls_of))
    latest = {}                         # block -> its latest real instance so far (its first index, its calls)
    placeholders = set()
    for p0 in range(found.start, end, length):
        for k, block in enumerate(found.blocks):
            at = p0 + found.offsets[k]
            if at >= end:
                break
            here = placed.get(at)
            if here is not None:
                latest[k] = (at, here[1])
                out.extend(renamed(e, at + j, at, len(block)) for j, e in enumerate(here[1]))
                if timed:
                    times.extend(real_times[e.index] for e in here[1])
                continue
            # A placeholder copies the block's nearest earlier instance (its first, for those before it).
            src_at, src = latest.get(k) or first_instance[k]
            out.extend(renamed(e, at + j, at, len(block), shift=at - src_at) for j, e in enumerate(src))
            placeholders.update(range(at, at + len(block)))
            if timed:
                times.extend([times[-1] if times else 0.0] * len(block))
    return (Trace(out, dict(calls.actors), list(calls.externals) + [None], first, dict(calls.task_options), times),
            frozenset(placeholders), frozenset(crossed))


def infer_blocks(calls: Trace, repeats: int = 2, task_slots: int = 1,
                 exclude: frozenset = frozenset()) -> tuple[Plan, Trace, int] | None:
    """(the plan of the loop of blocks that ends ``calls``, the laid-out trace its indices count in, how many of
    the calls its region holds), or None.  Replay begins where the calls end (``Plan.switch`` is the phase
    there): the next call begins a block."""
    found = find_blocks(calls)
    if found is None:
        return None
    laid, placeholders, crossed = lay_out(calls, found)
    pattern = find_pooled(laid, repeats=repeats, exclude=exclude, length=found.length)
    if pattern is None:
        return None
    cross = -len(laid.externals)
    last = pattern.start + (pattern.repeats - 1) * pattern.length       # (the period infer_pooled takes)
    relays = frozenset((q, j) for q in range(pattern.length)
                       for j, ref in enumerate(ref_slots(laid.event(last + q))) if ref.producer == cross)
    plan = _read_by_driver(infer_pooled(laid, pattern, task_slots=task_slots, any_relays=relays),
                           {(found.start + offset - pattern.start) % pattern.length for offset in crossed})
    if any(laid.ref_id(seed.producer, seed.ret) is None for seed in plan.seeds(plan.end)):
        return None                     # (it would start from a value a skipped block never made)
    held = sum(1 for i in range(pattern.start, pattern.end) if i not in placeholders)
    # (the plan counts positions from its region's start, which need not be the layout's first period's)
    starts = tuple(sorted((found.start + offset - plan.start) % found.length for offset in found.offsets))
    return replace(plan, reads_excluded=True, blocks=starts, switch=plan.phase), laid, held


def _read_by_driver(plan: Plan, positions) -> Plan:
    """``plan`` with the results of ``positions`` read by the driver too: they are passed from block to block,
    which the driver relays (a result read inside its block would otherwise go to its reader alone)."""
    connections = []
    for c in plan.connections:
        if c.source == "period" and c.producer in positions and c.uses and not c.to_driver:
            c = replace(c, uses=c.uses + (Use(c.producer, DRIVER, 0, "get"),), to_driver=True, actor_only=False)
        connections.append(c)
    return replace(plan, connections=tuple(connections))


__all__ = ["Blocks", "find_blocks", "infer_blocks", "lay_out"]
