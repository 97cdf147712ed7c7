"""Plan: the reactor graph that ``infer`` finds in a trace, as plain data.

A plan describes one *period* of the script's loop: ``period`` events, numbered
by their *position* 0..period-1.  The event at absolute trace index ``i`` (at or
after ``start``) sits at position ``(i - start) % period``.

- ``reactions[q]`` is what position ``q`` does: a call runs on an actor or task
  reactor; a put, get or wait runs on the driver.  The driver issues every
  position in order (a call, for the driver, is writing an invocation).
- ``reactors`` each execute their ``schedule`` (positions, in order) once per
  period.  Executing reactions in trace order on every reactor cannot deadlock:
  each waits only on reactions that came earlier in the trace.
- ``connections`` carry values.  One per output of every call or put in the
  period (fan-out is one write, read by every ``Use``), plus one per value made
  before the period (``prefix``) or outside the trace (``external``), which the
  replay seeds once and never rewrites.  A ``Use`` with ``lag`` k reads the
  token written k periods before its own (loop-carried when k > 0).  A ``relay``
  connection serves a ref that reaches back a *varying* number of periods (a loop
  in completion order): the driver writes the value of whichever output of
  position ``producer`` the call names, keyed by the reading call's own index
  (``ANY_POSITION``: any value the driver holds, as a loop of blocks in any
  order passes from block to block).
  ``capacity`` is the fewest tokens the channel must hold so that no writer
  waits on a reader that comes after it in the trace.
- ``pools``: a position whose call goes to whichever of several actors of one
  class (a loop in completion order) runs on a reactor per member, each with that
  one position in its schedule; ``Reaction.reactor`` names the pool.
- ``blocks``: a loop whose blocks of calls come in any order lays them out in
  one period (``core.infer_blocks``); a call that begins another block than the
  one at the driver's position skips to it, in this period or the next.
- ``guard`` is what the driver checks, per position, before treating a call as
  the pattern's.
- ``seeds(first_index)`` lists the values, made before replay begins at
  ``first_index``, that replayed reactions still read.

Everything here is JSON-serializable (``to_json``/``from_json``); actor and
function keys appear as strings in the descriptive fields, as given by the
runtime in the guard.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass

from .record import ref_slots, signature

DRIVER = "driver"
ANY_POSITION = -1       # a relay's producer: any value the driver holds (a plan of blocks, from block to block)


@dataclass(frozen=True)
class Input:
    """A read of a connection's token from ``lag`` periods back."""

    connection: int
    lag: int
    passing: str          # 'value' (resolved before the call) | 'ref' (nested) | 'get' | 'wait'


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a call: a literal sent with the invocation (``input`` is
    None; ``nested`` are refs inside it), or a ref resolved from ``input``."""

    name: int | str
    input: Input | None = None
    nested: tuple[Input, ...] = ()


@dataclass(frozen=True)
class Reaction:
    position: int
    reactor: str
    op: str               # 'task' | 'actor_method' | 'put' | 'get' | 'wait'
    target: str           # method name or function key; '' for driver ops
    call_site: str
    args: tuple[ArgSpec, ...] = ()       # calls: positional, then keyword arguments
    reads: tuple[Input, ...] = ()        # get/wait: the refs in the script's order; put: nested refs
    outputs: tuple[int, ...] = ()        # connection ids, one per return

    def inputs(self) -> tuple[Input, ...]:
        """Every ref read, in ``record.ref_slots`` order (direct, then nested)."""
        if self.reads:
            return self.reads
        direct = tuple(a.input for a in self.args if a.input is not None)
        return direct + tuple(i for a in self.args for i in a.nested)


@dataclass(frozen=True)
class Use:
    position: int
    reactor: str
    lag: int
    passing: str


@dataclass(frozen=True)
class Connection:
    id: int
    source: str           # 'period' | 'prefix' | 'external'
    producer: int         # period position | absolute trace index | external number k (ref -1-k)
    ret: int
    reactor: str          # the writer; the driver seeds prefix and external values
    uses: tuple[Use, ...]
    capacity: int
    to_driver: bool       # the driver reads it (get/wait), or it is passed nested in an argument (as a ref)
    actor_only: bool      # written and read by workers only: never crosses the driver


@dataclass(frozen=True)
class Reactor:
    name: str
    kind: str             # 'driver' | 'actor' | 'task'
    actor: str | None
    class_key: str | None
    concurrent: bool      # threaded or async actor
    schedule: tuple[int, ...]


@dataclass(frozen=True)
class RefCheck:
    relative: bool        # True: produced ``value`` events earlier; False: by event ``value``
    value: int            # (varying: the position that made it)
    ret: int
    varying: bool = False  # made by position ``value`` of any period (a loop in completion order)


@dataclass(frozen=True)
class Expect:
    signature: tuple      # record.signature of the expected event (a pool's: with its actor left out)
    refs: tuple[RefCheck, ...]
    members: tuple = ()   # a pool's position: the actors it may call


@dataclass(frozen=True)
class Guard:
    """Per-position expectations; ``check`` is O(number of arguments)."""

    period: int
    start: int
    expects: tuple[Expect, ...]

    def position(self, index: int) -> int:
        return (index - self.start) % self.period

    def check(self, event) -> bool:
        expect = self.expects[(event.index - self.start) % self.period]
        if expect.members:
            sig = signature(event)
            if getattr(event, "actor", None) not in expect.members or sig[:2] + sig[3:] != expect.signature:
                return False
        elif signature(event) != expect.signature:
            return False
        for ref, want in zip(ref_slots(event), expect.refs):
            if want.varying and want.value == ANY_POSITION:
                continue                  # (whatever the driver holds)
            if ref.ret != want.ret:
                return False
            if want.varying:
                if ref.producer < 0 or (ref.producer - self.start) % self.period != want.value:
                    return False
            elif want.relative:
                if ref.producer < 0 or event.index - ref.producer != want.value:
                    return False
            elif ref.producer != want.value:
                return False
        return True


@dataclass(frozen=True)
class Pool:
    """A position whose call goes to whichever member is free: ``members`` are reactor names."""

    position: int
    name: str             # the name ``Reaction.reactor`` gives it
    members: tuple[str, ...]


@dataclass(frozen=True, order=True)
class Seed:
    """A value made before replay that replay must write into ``connection``:
    return ``ret`` of trace event ``producer`` (or external ref ``producer`` < 0)."""

    producer: int
    connection: int
    ret: int


@dataclass(frozen=True)
class Plan:
    period: int
    start: int            # absolute index of the first periodic event (position 0)
    end: int              # absolute index one past the last recorded event
    repeats: int          # full periods recorded
    switch: int           # the position where replay had best begin (fewest seeds)
    reactors: tuple[Reactor, ...]
    reactions: tuple[Reaction, ...]
    connections: tuple[Connection, ...]
    guard: Guard
    blockers: tuple[str, ...] = ()   # reasons replay must not run this plan
    # Found in the trace without its gets and waits (record.Trace.without_reads): indices count calls and
    # puts only, and every read is served off the plan.
    reads_excluded: bool = False
    pools: tuple[Pool, ...] = ()
    # A loop of blocks taken in any order (core.infer_blocks): the position where each block begins.  The driver
    # skips from one block's beginning to another's; what a skipped position would have made nobody names.
    blocks: tuple[int, ...] = ()

    @property
    def replayable(self) -> bool:
        return not self.blockers

    @property
    def phase(self) -> int:
        """The position of the first event after the trace."""
        return (self.end - self.start) % self.period

    def position(self, index: int) -> int:
        return (index - self.start) % self.period

    def reactor(self, name: str) -> Reactor:
        return next(r for r in self.reactors if r.name == name)

    def members(self, name: str) -> tuple[str, ...]:
        """The reactors a reaction's ``reactor`` stands for: a pool's members, else itself."""
        for pool in self.pools:
            if pool.name == name:
                return pool.members
        return (name,)

    def schedule(self, name: str) -> list[Reaction]:
        return [self.reactions[q] for q in self.reactor(name).schedule]

    def distance(self, connection: Connection, use: Use) -> int:
        """How many trace events separate a token's write from this read of it."""
        return use.lag * self.period + use.position - connection.producer

    def seeds(self, first_index: int) -> list[Seed]:
        """Values produced before ``first_index`` that reactions at or after it
        read: every prefix/external value, and the in-flight tokens of period
        connections.  Sorted by producer, so writing them in order keeps each
        channel's token order."""
        found = set()
        for conn in self.connections:
            if conn.source == "relay":
                continue          # (the driver relays such a value when the call names it)
            if conn.source != "period":
                producer = conn.producer if conn.source == "prefix" else -1 - conn.producer
                found.add(Seed(producer, conn.id, conn.ret))
                continue
            for use in conn.uses:
                d = self.distance(conn, use)
                read = first_index + (self.start + use.position - first_index) % self.period
                while read < first_index + d:
                    found.add(Seed(read - d, conn.id, conn.ret))
                    read += self.period
        return sorted(found)

    # -- presentation ---------------------------------------------------------

    def describe(self) -> str:
        lines = [f"period of {self.period} events starting at trace event {self.start}, "
                 f"{self.repeats} full periods recorded, next position {self.phase}, "
                 f"replay best begins at position {self.switch}"
                 + ("; gets and waits left out (each served off the plan)" if self.reads_excluded else "")]
        for r in self.reactors:
            extra = f" {r.class_key}" if r.class_key else ""
            extra += " (concurrent)" if r.concurrent else ""
            steps = ", ".join(f"{q}:{_label(self.reactions[q], r.kind)}" for q in r.schedule)
            lines.append(f"  {r.name}{extra}: {steps}")
        for c in self.connections:
            src = (f"{c.producer}.{c.ret}" if c.source == "period" else f"{c.source} {c.producer}.{c.ret}")
            uses = ", ".join(f"{u.position}@{u.reactor}" + (f" lag {u.lag}" if u.lag else "")
                             + ("" if u.passing == "value" else f" ({u.passing})") for u in c.uses) or "unread"
            flags = " driver-read" if c.to_driver else (" worker-to-worker" if c.actor_only else "")
            lines.append(f"  c{c.id}: {src} [{c.reactor}] -> {uses}; capacity {c.capacity}{flags}")
        lines.extend(f"  {p.name}: a loop in completion order, position {p.position} goes to whichever of "
                     f"{', '.join(p.members)} the script calls" for p in self.pools)
        if self.blocks:
            lines.append(f"  blocks of calls taken in any order, beginning at positions "
                         f"{', '.join(map(str, self.blocks))}")
        lines.extend(f"  blocker: {b}" for b in self.blockers)
        return "\n".join(lines)

    def to_dot(self) -> str:
        out = ["digraph plan {", "  rankdir=LR; node [shape=box, fontsize=10];"]
        for i, r in enumerate(self.reactors):
            out.append(f'  subgraph cluster_{i} {{ label="{_esc(r.name)}";')
            out.extend(f'    p{q} [label="{q}: {_esc(_label(self.reactions[q], r.kind))}"];' for q in r.schedule
                       if r.kind != "driver" or self.reactions[q].reactor == DRIVER)
            out.append("  }")
        for c in self.connections:
            if c.source == "period":
                tail = f"p{c.producer}"
            else:
                tail = f"s{c.id}"
                out.append(f'  {tail} [shape=ellipse, label="{c.source} {c.producer}.{c.ret}"];')
            for u in c.uses:
                style = ' style=dashed' if u.lag else ""
                label = (f"lag {u.lag} " if u.lag else "") + ("" if u.passing == "value" else u.passing)
                out.append(f'  {tail} -> p{u.position} [label="{label.strip()}"{style}];')
        out.append("}")
        return "\n".join(out)

    def to_json(self, **kwargs) -> str:
        return json.dumps(dataclasses.asdict(self), default=_jsonable, **kwargs)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return _decode(cls, json.loads(text))


def key_text(value) -> str:
    """An actor id or function key as the plan's descriptive fields name it (hex for bytes)."""
    return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)


def _label(reaction: Reaction, kind: str) -> str:
    if kind == "driver" and reaction.reactor != DRIVER:
        return f"call {reaction.reactor}"
    return reaction.target or reaction.op


def _esc(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def _jsonable(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _decode(tp, value):
    """Rebuild dataclasses and tuples from JSON data, following type hints."""
    if value is None:
        return None
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _decode(hints[f.name], value[f.name]) for f in dataclasses.fields(tp)})
    origin = typing.get_origin(tp)
    if origin is tuple:
        (item, *_) = typing.get_args(tp)
        return tuple(_decode(item, v) for v in value)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if tp is tuple:
        return _tuples(value)
    return value


__all__ = ["ANY_POSITION", "ArgSpec", "Connection", "DRIVER", "Expect", "Guard", "Input", "Plan", "Pool",
           "Reaction", "Reactor", "RefCheck", "Seed", "Use", "key_text"]
