"""Record: the warm-up trace of API events, as plain data.

While the runtime runs in dynamic mode it tells a ``Recorder`` about every
``.remote()``, ``get``, ``wait``, ``put``, actor creation and kill.  The recorder
keeps no values and no ObjectRefs (holding a ref would keep its value alive);
it turns every ref into a *producer reference*: which earlier event made it and
which of that event's returns it is.  ``infer`` works on these events only.

Event indices are positions in the trace and keep counting for as long as the
recorder lives, so a guard or a replay can name any event by its index.

Hot path: ``on_submit`` & co. run on every call in dynamic mode; each does a few
dict lookups and appends one small slotted object.  No values are hashed,
copied or pickled here.
"""

from __future__ import annotations

import json
import sys
from time import monotonic as _now
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Hashable, Mapping, Sequence

TASK = "task"
ACTOR_METHOD = "actor_method"
ACTOR_CREATE = "actor_create"


@dataclass(slots=True)
class RefArg:
    """An ObjectRef, named by its producer: event ``producer``'s return ``ret``.

    A ref that no recorded event produced (made before recording began, or
    returned inside a value by a task) is *external*: ``producer`` is
    ``-1 - k`` for the k-th distinct such ref, ``ret`` is 0.
    """

    producer: int
    ret: int = 0


@dataclass(slots=True)
class Literal:
    """An argument passed by value. Only its type name is kept, never the value.

    ``nested`` are refs found inside the value (a list of refs, say): Ray passes
    those to the callee as refs, unresolved.
    """

    type_name: str
    nested: tuple = ()


@dataclass(slots=True)
class Submit:
    """A ``.remote()`` call of a task (``target`` = function key) or of an
    actor method (``actor`` = actor id, ``target`` = method name)."""

    index: int
    call_site: str
    kind: str
    target: Any
    actor: Any
    args: tuple          # of RefArg (passed directly: resolved) | Literal
    kwargs: tuple        # of (name, RefArg | Literal)
    num_returns: int
    ref_ids: tuple       # ids of the refs it returned, in return order


@dataclass(slots=True)
class Put:
    index: int
    call_site: str
    type_name: str
    nested: tuple        # of RefArg found inside the value
    ref_id: Any


@dataclass(slots=True)
class Get:
    index: int
    call_site: str
    refs: tuple          # of RefArg, in the order the script listed them
    single: bool         # get(ref) rather than get([refs])
    timeout: bool        # a timeout was given


@dataclass(slots=True)
class Wait:
    index: int
    call_site: str
    refs: tuple
    num_returns: int
    timeout: bool


@dataclass(slots=True)
class ActorCreate:
    index: int
    call_site: str
    class_key: Any
    actor: Any
    args: tuple
    kwargs: tuple
    max_concurrency: int = 1
    is_async: bool = False


@dataclass(slots=True)
class ActorKill:
    index: int
    call_site: str
    actor: Any


@dataclass(slots=True)
class Cancel:
    """``ray.cancel`` of a ref.  Like a kill it never repeats: a loop that cancels is no fixed pattern
    (replay would have to interrupt a reaction that is running, and cannot)."""

    index: int
    call_site: str
    ref: RefArg


Event = Submit | Put | Get | Wait | ActorCreate | ActorKill | Cancel
EVENT_TYPES = {cls.__name__: cls for cls in (Submit, Put, Get, Wait, ActorCreate, ActorKill, Cancel)}


@dataclass(slots=True)
class ActorInfo:
    """What the reactor layer must know about an actor it may schedule."""

    class_key: Any
    max_concurrency: int = 1
    is_async: bool = False
    max_task_retries: int = 0

    @property
    def concurrent(self) -> bool:
        return self.is_async or self.max_concurrency > 1


def ref_slots(event) -> tuple:
    """All refs an event reads, in a fixed order: direct args, direct kwargs,
    then refs nested in literal args and kwargs (and, for Put, in the value)."""
    kind = type(event)
    if kind is Get or kind is Wait:
        return event.refs
    if kind is Put:
        return event.nested
    if kind is ActorKill or kind is Cancel:
        return ()
    values = list(event.args) + [v for _, v in event.kwargs]
    direct = tuple(v for v in values if type(v) is RefArg)
    nested = tuple(r for v in values if type(v) is Literal for r in v.nested)
    return direct + nested


def signature(event) -> tuple:
    """Everything about an event that a repetition must reproduce, except its
    refs (compared separately, relative to position) and call site.

    Literal types are left out on purpose: replay sends whatever value the
    script passes, so an int where a float was is no deviation.  Actor creation
    and kill include the actor id, so they never repeat: a period that creates
    or kills actors is not a fixed pattern.
    """
    kind = type(event)
    if kind is Submit:
        return (kind.__name__, event.kind, event.actor, event.target, event.num_returns,
                tuple(_arg_shape(a) for a in event.args),
                tuple((k, _arg_shape(v)) for k, v in event.kwargs))
    if kind is Get:
        return ("Get", len(event.refs), event.single, event.timeout)
    if kind is Wait:
        return ("Wait", len(event.refs), event.num_returns, event.timeout)
    if kind is Put:
        return ("Put", len(event.nested))
    if kind is ActorCreate:
        return ("ActorCreate", event.actor)
    if kind is Cancel:
        return ("Cancel", event.index)
    return ("ActorKill", event.actor, event.index)


def _arg_shape(arg):
    return "ref" if type(arg) is RefArg else len(arg.nested)


def produces(event) -> int:
    """How many refs an event returns (and so how many a later event may name)."""
    kind = type(event)
    if kind is Submit:
        # A dynamic or streaming count is no fixed output set: infer blocks such plans.
        return event.num_returns if type(event.num_returns) is int else 0
    return 1 if kind is Put else 0


@dataclass
class Trace:
    """The recorded events plus what infer needs to know beyond them.

    ``externals[k]`` is the id of external ref ``-1 - k``; ``first_index`` is
    the index of ``events[0]`` (a recorder may drop events it no longer needs).
    """

    events: list = field(default_factory=list)
    actors: dict = field(default_factory=dict)       # actor id -> ActorInfo
    externals: list = field(default_factory=list)
    first_index: int = 0
    task_options: dict = field(default_factory=dict)  # task target -> the option names it was called with
    times: list = field(default_factory=list)         # times[k]: time.monotonic() when events[k] was recorded

    def event(self, index: int):
        return self.events[index - self.first_index]

    def ref_id(self, producer: int, ret: int = 0):
        """The id of the ref named by a producer reference (for seeding replay)."""
        if producer < 0:
            return self.externals[-1 - producer]
        ev = self.event(producer)
        if ret >= produces(ev):
            raise LookupError(f"event {producer} ({type(ev).__name__}) has no return {ret}")
        return ev.ref_id if type(ev) is Put else ev.ref_ids[ret]

    def without_reads(self) -> "Trace":
        """The same trace with every get and wait left out and the other events renumbered from
        ``first_index`` (refs renamed to match): the calls alone, for scripts whose reads follow no fixed
        pattern (a ``wait`` for whichever result is ready first), which replay serves off the plan."""
        renumbered = {}
        for event in self.events:
            if type(event) not in (Get, Wait):
                renumbered[event.index] = self.first_index + len(renumbered)

        def ref(r):
            return r if r.producer < 0 else RefArg(renumbered[r.producer], r.ret)

        def arg(a):
            if type(a) is RefArg:
                return ref(a)
            return Literal(a.type_name, tuple(ref(r) for r in a.nested)) if a.nested else a

        events, times = [], []
        timed = len(self.times) == len(self.events)    # (a trace loaded from a file has no times)
        for k, event in enumerate(self.events):
            kind = type(event)
            if kind in (Get, Wait):
                continue
            if timed:
                times.append(self.times[k])
            index = renumbered[event.index]
            if kind is Submit or kind is ActorCreate:
                event = replace(event, index=index, args=tuple(arg(a) for a in event.args),
                                kwargs=tuple((k, arg(v)) for k, v in event.kwargs))
            elif kind is Put:
                event = replace(event, index=index, nested=tuple(ref(r) for r in event.nested))
            elif kind is Cancel:
                event = replace(event, index=index, ref=ref(event.ref))
            else:
                event = replace(event, index=index)
            events.append(event)
        return Trace(events, dict(self.actors), list(self.externals), self.first_index, dict(self.task_options),
                     times)

    def reads_among_calls(self, start: int) -> bool:
        """Whether a get or wait lies between the call numbered ``start`` ``without_reads`` and the last
        call: a pattern of the calls alone that has none is one burst of calls, not a loop around reads."""
        calls = [k for k, e in enumerate(self.events) if type(e) not in (Get, Wait)]
        if start - self.first_index >= len(calls):
            return False
        first = calls[start - self.first_index]
        return any(type(e) in (Get, Wait) for e in self.events[first:calls[-1]])

    def calls_between(self, start: int, end: int) -> int:
        """How many events from index ``start`` to ``end`` (excluded) are no get or wait."""
        lo, hi = max(0, start - self.first_index), max(0, end - self.first_index)
        return sum(1 for e in self.events[lo:hi] if type(e) not in (Get, Wait))

    def reads_repeat(self, start: int, period: int, repeats: int) -> bool:
        """Whether the gets and waits repeat with a period found ``without_reads`` (``start``, ``period``
        in that numbering) over its last ``repeats`` full periods: then a plan that has them is near, and
        better (its reads replay on the fast path)."""
        calls = [e.index for e in self.events if type(e) not in (Get, Wait)]
        full = (len(calls) - (start - self.first_index)) // period
        if full < repeats:
            return False
        rounds = []
        for k in range(full - repeats, full):
            begin = calls[start - self.first_index + k * period]
            end = calls[start - self.first_index + (k + 1) * period] if (k + 1) * period + start - \
                self.first_index < len(calls) else self.first_index + len(self.events)
            rounds.append(tuple((signature(e), tuple(r.producer - begin for r in e.refs))
                                for e in self.events[begin - self.first_index:end - self.first_index]
                                if type(e) in (Get, Wait)))
        return all(r == rounds[0] for r in rounds)

    def to_json(self) -> str:
        return json.dumps({
            "first_index": self.first_index,
            "externals": self.externals,
            "actors": [[key, asdict(info)] for key, info in self.actors.items()],
            "events": [{"type": type(e).__name__, **asdict(e)} for e in self.events],
            "task_options": [[key, sorted(names)] for key, names in self.task_options.items()],
        }, default=_jsonable)

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        """Rebuild a trace written by ``to_json`` (ids come back as strings)."""
        data = json.loads(text)
        events = [_event_from_dict(d) for d in data["events"]]
        actors = {_hashable(k): ActorInfo(**v) for k, v in data["actors"]}
        task_options = {_hashable(k): frozenset(v) for k, v in data.get("task_options", ())}
        return cls(events, actors, data["externals"], data["first_index"], task_options)


def _jsonable(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _ref_or_literal(d):
    if "producer" in d:
        return RefArg(d["producer"], d["ret"])
    return Literal(d["type_name"], tuple(RefArg(r["producer"], r["ret"]) for r in d["nested"]))


def _event_from_dict(d):
    d = dict(d)
    cls = EVENT_TYPES[d.pop("type")]
    if "args" in d:
        d["args"] = tuple(_ref_or_literal(a) for a in d["args"])
        d["kwargs"] = tuple((k, _ref_or_literal(v)) for k, v in d["kwargs"])
    if "ref" in d:
        d["ref"] = RefArg(d["ref"]["producer"], d["ref"]["ret"])
    for key in ("refs", "nested"):
        if key in d:
            d[key] = tuple(RefArg(r["producer"], r["ret"]) for r in d[key])
    for key in ("target", "actor", "class_key"):
        if key in d:
            d[key] = _hashable(d[key])
    if "ref_ids" in d:
        d["ref_ids"] = tuple(d["ref_ids"])
    return cls(**d)


class Recorder:
    """Turns API calls into events.  One per driver; not thread-safe (the
    runtime calls it under whatever lock already orders submissions).

    ``ref_type`` is the ObjectRef class (an ``isinstance`` target); ``ref_id``
    maps a ref to a hashable id (default: its ``binary()``).  ``internal`` are
    path prefixes of frames to skip when finding the user's call site.
    """

    def __init__(self, ref_type: type | tuple, ref_id: Callable[[Any], Hashable] | None = None,
                 internal: Sequence[str] = (), actors: Mapping | None = None, first_index: int = 0):
        self._is_ref = ref_type
        self._ref_id = ref_id or (lambda ref: ref.binary())
        self._internal = tuple(internal)
        self._producers: dict = {}     # ref id -> RefArg
        self._externals: dict = {}     # ref id -> external RefArg
        self._literals: dict = {}      # type -> shared Literal
        self.trace = Trace(actors=dict(actors or {}), first_index=first_index)
        self._events = self.trace.events
        self._times = self.trace.times
        self._next = first_index
        self.reads = 0                 # gets and waits recorded (the index without them: next_index - reads)

    # -- the hot path -------------------------------------------------------

    def on_submit(self, kind: str, target, actor, args: Sequence, kwargs: Mapping,
                  num_returns: int, ref_ids: Sequence, nested: Mapping | None = None,
                  call_site: str | None = None) -> None:
        """A ``.remote()`` call. ``nested`` maps an argument position or keyword
        to the ids of refs the serializer found inside that argument."""
        index = self._next
        self._next = index + 1
        if nested:
            arg_refs = tuple([self._nested(a, nested.get(i)) for i, a in enumerate(args)])
            kw_refs = tuple([(k, self._nested(v, nested.get(k))) for k, v in kwargs.items()])
        else:
            arg = self._arg
            arg_refs = tuple([arg(a) for a in args]) if args else ()
            kw_refs = tuple([(k, arg(v)) for k, v in kwargs.items()]) if kwargs else ()
        self._times.append(_now())
        self._events.append(Submit(index, call_site or self.call_site(), kind, target, actor,
                                   arg_refs, kw_refs, num_returns, tuple(ref_ids)))
        producers = self._producers
        ret = 0
        for ref_id in ref_ids:
            producers[ref_id] = RefArg(index, ret)
            ret += 1

    def on_put(self, value, ref_id, nested_ids: Sequence = (), call_site: str | None = None) -> None:
        index = self._next
        self._next = index + 1
        self._times.append(_now())
        self._events.append(Put(index, call_site or self.call_site(), type(value).__name__,
                                tuple(self._named(i) for i in nested_ids), ref_id))
        self._producers[ref_id] = RefArg(index, 0)

    def on_get(self, refs, timeout=None, call_site: str | None = None) -> None:
        single = isinstance(refs, self._is_ref)
        index = self._next
        self._next = index + 1
        self.reads += 1
        named = (self._ref(refs),) if single else tuple(self._ref(r) for r in refs)
        self._times.append(_now())
        self._events.append(Get(index, call_site or self.call_site(), named, single, timeout is not None))

    def on_wait(self, refs, num_returns: int = 1, timeout=None, call_site: str | None = None) -> None:
        index = self._next
        self._next = index + 1
        self.reads += 1
        self._times.append(_now())
        self._events.append(Wait(index, call_site or self.call_site(), tuple(self._ref(r) for r in refs),
                                 num_returns, timeout is not None))

    # -- rarer events ---------------------------------------------------------

    def on_task_options(self, target, option_names) -> None:
        """The options a task call site was submitted with (what replay can honour depends on them)."""
        self.trace.task_options[target] = frozenset(option_names)

    def on_actor_create(self, class_key, actor, args: Sequence = (), kwargs: Mapping | None = None,
                        max_concurrency: int = 1, is_async: bool = False,
                        nested: Mapping | None = None, call_site: str | None = None,
                        max_task_retries: int = 0) -> None:
        index = self._next
        self._next = index + 1
        nested = nested or {}
        arg_refs = tuple(self._nested(a, nested.get(i)) for i, a in enumerate(args))
        kw_refs = tuple((k, self._nested(v, nested.get(k))) for k, v in (kwargs or {}).items())
        self._times.append(_now())
        self._events.append(ActorCreate(index, call_site or self.call_site(), class_key, actor,
                                        arg_refs, kw_refs, max_concurrency, is_async))
        self.trace.actors[actor] = ActorInfo(class_key, max_concurrency, is_async, max_task_retries)

    def on_cancel(self, ref, call_site: str | None = None) -> None:
        index = self._next
        self._next = index + 1
        self._times.append(_now())
        self._events.append(Cancel(index, call_site or self.call_site(), self._ref(ref)))

    def on_actor_kill(self, actor, call_site: str | None = None) -> None:
        index = self._next
        self._next = index + 1
        self._times.append(_now())
        self._events.append(ActorKill(index, call_site or self.call_site(), actor))

    # -- helpers --------------------------------------------------------------

    @property
    def next_index(self) -> int:
        return self._next

    def call_site(self) -> str:
        """``file:line`` of the innermost frame outside the recorder and ``internal``."""
        frame = sys._getframe(1)
        skip = self._internal + (__file__,)
        while frame.f_back is not None and frame.f_code.co_filename.startswith(skip):
            frame = frame.f_back
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"

    def _arg(self, value):
        if isinstance(value, self._is_ref):
            return self._named(self._ref_id(value))
        # Literals without nested refs are shared per type: nothing here is ever mutated.
        kind = type(value)
        literal = self._literals.get(kind)
        if literal is None:
            literal = self._literals[kind] = Literal(kind.__name__)
        return literal

    def _nested(self, value, nested_ids):
        if nested_ids and not isinstance(value, self._is_ref):
            return Literal(type(value).__name__, tuple(self._named(i) for i in nested_ids))
        return self._arg(value)

    def _ref(self, ref) -> RefArg:
        return self._named(self._ref_id(ref))

    def _named(self, ref_id) -> RefArg:
        found = self._producers.get(ref_id)
        if found is not None:
            return found
        found = self._externals.get(ref_id)
        if found is None:
            found = self._externals[ref_id] = RefArg(-1 - len(self._externals), 0)
            self.trace.externals.append(ref_id)
        return found
