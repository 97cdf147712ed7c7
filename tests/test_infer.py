"""infer: synthetic traces in, plans out (pure; no processes).

Traces are made by driving a real ``Recorder`` the way the runtime does, with a
plain ref class as test data.  Beyond shape assertions, every plan is checked
two ways: its guard must accept the recorded periodic events, and a small
simulation of the reactor schedule (bounded channels of the plan's capacities,
seeded with ``plan.seeds``) must run the continuation of the script without
deadlock, each read getting the token of the producer the script named.
"""

import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayreact.core.infer import find_period, in_flight, infer
from rayreact.core.plan import DRIVER, Plan, Seed
from rayreact.core.record import ACTOR_METHOD, TASK, RefArg, Recorder, Trace, ref_slots


class Ref:
    __slots__ = ("id",)

    def __init__(self, ref_id):
        self.id = ref_id

    def binary(self):
        return self.id


class Script:
    """Issues API events to a Recorder, as the runtime would."""

    def __init__(self, actors=(), recorder=None):
        self.rec = recorder or Recorder(Ref)
        self._ids = itertools.count()
        for actor in actors:
            self.create(actor)

    @property
    def trace(self):
        return self.rec.trace

    def _refs(self, n):
        return [Ref(f"o{next(self._ids)}") for _ in range(n)]

    def create(self, actor, cls="Env", **opts):
        self.rec.on_actor_create(cls, actor, **opts)

    def call(self, actor, method, *args, num_returns=1, nested=None, **kwargs):
        out = self._refs(num_returns if isinstance(num_returns, int) else 1)
        self.rec.on_submit(ACTOR_METHOD, method, actor, args, kwargs, num_returns, [r.id for r in out], nested)
        return out[0] if len(out) == 1 else out

    def task(self, fn, *args, num_returns=1, **kwargs):
        out = self._refs(num_returns)
        self.rec.on_submit(TASK, fn, None, args, kwargs, num_returns, [r.id for r in out])
        return out[0] if num_returns == 1 else out

    def put(self, value=0, nested_ids=()):
        (ref,) = self._refs(1)
        self.rec.on_put(value, ref.id, nested_ids)
        return ref

    def get(self, refs, timeout=None):
        self.rec.on_get(refs, timeout)

    def wait(self, refs, num_returns=1, timeout=None):
        self.rec.on_wait(refs, num_returns, timeout)


def replay_check(plan, full_trace, first=None):
    """Run the plan's reactors from ``first`` (default: the first switch point
    at or after the plan's end) over the events of ``full_trace`` that the
    guard accepts; assert no deadlock, right tokens, nothing left unseeded.
    Returns how many events were replayed."""
    P, events = plan.period, full_trace.events
    if first is None:
        first = plan.end + (plan.switch - plan.phase) % P
    last = first
    while last < len(events) and plan.guard.check(events[last]):
        last += 1
    tokens = {}                                  # (connection, producer index) -> reads left
    for seed in plan.seeds(first):
        conn = plan.connections[seed.connection]
        tokens[(conn.id, seed.producer)] = _reads_after(plan, conn, seed.producer, first)
    assert all(left > 0 for left in tokens.values()), "a seed nobody reads"
    invoked = set()                              # invocations written, not yet run
    cursor = {r.name: _first_at_or_after(plan, r, first) for r in plan.reactors}
    while any(cursor[r.name] < last for r in plan.reactors):
        progressed = False
        for r in plan.reactors:
            a = cursor[r.name]
            if a >= last:
                continue
            reaction = plan.reactions[plan.position(a)]
            if r.kind == "driver" and reaction.reactor != DRIVER:
                # An invocation channel holds one message: wait for the worker to take the last.
                if any(plan.reactions[plan.position(i)].reactor == reaction.reactor for i in invoked):
                    continue
                invoked.add(a)
            else:
                if r.kind != "driver" and a not in invoked:
                    continue
                if not _fire(plan, reaction, a, tokens, events[a]):
                    continue
                invoked.discard(a)
            cursor[r.name] = _first_at_or_after(plan, r, a + 1)
            progressed = True
        assert progressed, f"deadlock at {cursor}"
    return last - first


def _first_at_or_after(plan, reactor, index):
    a = index
    while plan.position(a) not in reactor.schedule:
        a += 1
    return a


def _reads_after(plan, conn, producer, first):
    if conn.source != "period":
        return float("inf")
    return sum(1 for u in conn.uses if producer + plan.distance(conn, u) >= first)


def _fire(plan, reaction, a, tokens, event):
    """Run the reaction at index ``a`` if its inputs are there and its outputs fit."""
    wanted = []
    for inp, ref in zip(reaction.inputs(), ref_slots(event)):
        conn = plan.connections[inp.connection]
        if conn.source == "period":
            producer = a - (inp.lag * plan.period + plan.position(a) - conn.producer)
        else:
            producer = conn.producer if conn.source == "prefix" else -1 - conn.producer
        assert ref == RefArg(producer, conn.ret), (a, inp, ref)
        if (conn.id, producer) not in tokens:
            return False
        wanted.append((conn.id, producer))
    for out in reaction.outputs:
        live = sum(1 for (cid, _), left in tokens.items() if cid == out and left > 0)
        if live >= plan.connections[out].capacity:
            return False
    for key in wanted:
        tokens[key] -= 1
    for out in reaction.outputs:
        conn = plan.connections[out]
        tokens[(out, a)] = len(conn.uses)
    return True


def gym_script(actors=3, rounds=6):
    s = Script([f"env{i}" for i in range(actors)])
    s.get([s.call(f"env{i}", "reset") for i in range(actors)])
    for step in range(rounds):
        s.get([s.call(f"env{i}", "step", step % 2) for i in range(actors)])
    return s


def test_broadcast_gather():
    s = gym_script()
    plan = infer(s.trace)
    assert plan is not None and plan.replayable
    assert plan.period == 4 and plan.switch == 0 and plan.phase == 0
    assert [r.name for r in plan.reactors] == [DRIVER, "actor:env0", "actor:env1", "actor:env2"]
    assert [plan.reactions[q].op for q in range(4)] == ["actor_method"] * 3 + ["get"]
    assert plan.reactor("actor:env1").schedule == (1,)
    assert plan.reactor(DRIVER).schedule == (0, 1, 2, 3)
    gather = plan.reactions[3]
    assert [plan.connections[i.connection].producer for i in gather.reads] == [0, 1, 2]
    assert all(i.lag == 0 for i in gather.reads)
    assert all(c.to_driver and not c.actor_only and c.capacity == 1 for c in plan.connections)
    assert plan.seeds(plan.start) == []
    assert all(plan.guard.check(e) for e in s.trace.events[plan.start:])
    assert plan.start == 3 + 4 and plan.repeats == 6


def test_broadcast_of_a_put_is_one_write_read_by_all():
    s = Script(["a", "b", "c"])
    for step in range(5):
        w = s.put([step])
        s.get([s.call(x, "load", w) for x in "abc"])
    plan = infer(s.trace)
    (weights,) = [c for c in plan.connections if plan.reactions[c.producer].op == "put"]
    assert weights.reactor == DRIVER and not weights.to_driver
    assert {u.reactor for u in weights.uses} == {"actor:a", "actor:b", "actor:c"}
    assert all(u.passing == "value" and u.lag == 0 for u in weights.uses)
    assert plan.period == 5 and plan.switch == 0


def test_constant_from_the_prefix_is_seeded_once():
    s = Script(["a", "b"])
    w = s.put("weights")
    for step in range(4):
        s.get([s.call("a", "act", w, step), s.call("b", "act", w, step)])
    plan = infer(s.trace)
    (const,) = [c for c in plan.connections if c.source == "prefix"]
    assert const.producer == 2 and len(const.uses) == 2 and const.capacity == 1
    assert plan.seeds(plan.end) == [Seed(2, const.id, 0)]
    assert s.trace.ref_id(2) == w.id
    assert all(not c.relative for c in plan.guard.expects[0].refs)


def test_chain_flows_worker_to_worker():
    s = Script(["a", "b", "c"])
    for step in range(4):
        x = s.call("a", "f", step)
        y = s.call("b", "g", x)
        s.get(s.call("c", "h", y))
    plan = infer(s.trace)
    assert plan.period == 4
    a_to_b, b_to_c, c_to_driver = plan.connections
    assert a_to_b.actor_only and b_to_c.actor_only and not a_to_b.to_driver
    assert [u.reactor for u in a_to_b.uses] == ["actor:b"]
    assert c_to_driver.to_driver and not c_to_driver.actor_only
    assert plan.reactions[1].args[0].input.connection == a_to_b.id
    assert replay_check(plan, s.trace, plan.start) == len(s.trace.events) - plan.start


def test_fan_out_one_producer_many_consumers():
    s = Script(["src", "a", "b", "c"])
    for step in range(4):
        x = s.call("src", "make")
        outs = [s.call(n, "use", x) for n in "abc"]
        s.get(outs + [x])
    plan = infer(s.trace)
    fan = plan.connections[0]
    assert fan.producer == 0 and fan.reactor == "actor:src"
    assert [u.reactor for u in fan.uses] == ["actor:a", "actor:b", "actor:c", DRIVER]
    assert fan.to_driver and not fan.actor_only and fan.capacity == 1
    assert len(plan.connections) == 4          # one per output, whatever the readers


def test_loop_carried_ref_crosses_periods():
    s = Script()
    s.create("env")
    s.create("policy", "Policy")
    obs = s.call("env", "reset")
    for step in range(8):
        act = s.call("policy", "act", obs)
        obs, reward = s.call("env", "step", act, num_returns=2)
        s.get(reward)
    plan = infer(s.trace)
    assert plan.period == 3
    act, step, get = plan.reactions
    assert (act.target, step.target, get.op) == ("act", "step", "get")
    carried = plan.connections[act.args[0].input.connection]
    assert (carried.producer, carried.ret) == (1, 0) and act.args[0].input.lag == 1
    assert carried.actor_only and carried.capacity == 1
    seeds = plan.seeds(plan.end)
    assert len(seeds) == 1 and seeds[0].producer == len(s.trace.events) - 2
    assert s.trace.ref_id(seeds[0].producer, seeds[0].ret) == obs.id
    # The first periodic step read reset's output: the region starts one period later.
    assert plan.start == 3 + 3


def test_lag_two_needs_two_tokens():
    s = Script(["a"])
    history = [s.put(0), s.put(1)]
    for step in range(8):
        history.append(s.call("a", "f", history[-2]))
        s.get(history[-1])
    plan = infer(s.trace)
    assert plan.period == 2
    (carried,) = [c for c in plan.connections if c.uses and c.uses[0].lag == 2]
    assert carried.capacity == 3               # two in flight, plus the one being written
    assert len(plan.seeds(plan.end)) == 2
    replay_check(plan, s.trace, plan.start)


def test_pipelined_gather_reads_the_previous_period():
    s = Script(["a", "b"])
    pending = [s.call(x, "step") for x in "ab"]
    for step in range(6):
        ahead = [s.call(x, "step") for x in "ab"]
        s.get(pending)
        pending = ahead
    plan = infer(s.trace)
    assert plan.period == 3 and plan.reactions[0].target == "step"
    gather = plan.reactions[2]
    assert [i.lag for i in gather.reads] == [1, 1]
    assert all(c.capacity == 2 for c in plan.connections)
    assert len(plan.seeds(plan.end)) == 2
    replay_check(plan, s.trace, plan.start)


def test_long_lags_block_the_plan():
    s = Script(["a"])
    made = [s.put(k) for k in range(4)]
    for step in range(12):
        made.append(s.call("a", "f"))
        s.get(made[-4])
    assert infer(s.trace).replayable
    blockers = infer(s.trace, max_lag=2).blockers
    assert len(blockers) == 1 and "read 3 periods after" in blockers[0]


def test_tasks_spread_over_slots():
    s = Script()
    for step in range(4):
        parts = [s.task("square", i) for i in range(4)]
        total = s.task("add", *parts)
        s.get(total)
    plan = infer(s.trace, task_slots=2)
    assert plan.period == 6
    assert [r.name for r in plan.reactors] == [DRIVER, "task:0", "task:1"]
    assert plan.reactor("task:0").schedule == (0, 2, 4) and plan.reactor("task:1").schedule == (1, 3)
    add = plan.reactions[4]
    assert add.op == TASK and add.target == "add" and all(a.input is not None for a in add.args)
    assert replay_check(plan, s.trace, plan.start) == len(s.trace.events) - plan.start
    assert infer(s.trace).reactor("task:0").schedule == (0, 1, 2, 3, 4)


def test_prefix_and_partial_tail():
    s = gym_script(actors=3, rounds=5)
    s.call("env0", "step", 0)
    s.call("env1", "step", 1)
    plan = infer(s.trace)
    assert plan.period == 4 and plan.phase == 2 and plan.repeats == 5
    assert plan.switch == 0                       # before env0.step: nothing in flight
    assert plan.start == 7 and plan.end == len(s.trace.events)


def test_switch_prefers_the_soonest_position_with_nothing_in_flight():
    s = Script(["a", "b"])
    for step in range(5):
        s.get(s.call("a", "f"))
        s.get(s.call("b", "g"))
    s.call("a", "f")
    plan = infer(s.trace)
    assert plan.period == 4
    assert plan.reactions[0].target == "f" and plan.phase == 1
    assert plan.switch == 2                       # before b.g: no value in flight


def test_no_pattern():
    s = Script(["a", "b"])
    rng = random.Random(1)
    refs = []
    for step in range(30):
        target = rng.choice("ab")
        args = rng.sample(refs, k=min(len(refs), rng.randint(0, 2))) + [1] * rng.randint(0, 2)
        refs.append(s.call(target, rng.choice(["f", "g", "h"]), *args))
        if rng.random() < 0.3:
            s.get(rng.sample(refs, k=rng.randint(1, min(3, len(refs)))))
    assert infer(s.trace) is None
    assert infer(Trace()) is None


def test_growing_fan_in_is_no_pattern():
    s = Script(["a"])
    refs = []
    for step in range(10):
        refs.append(s.call("a", "f"))
        s.get(list(refs))
    assert infer(s.trace) is None


def test_repeats_is_configurable():
    s = Script(["a"])
    s.get(s.call("a", "init"))
    for step in range(3):
        s.get(s.call("a", "f", step))
    assert infer(s.trace, repeats=3).period == 2
    assert infer(s.trace, repeats=4) is None
    with pytest.raises(ValueError):
        infer(s.trace, repeats=1)


def test_max_period():
    s = gym_script(actors=5, rounds=4)
    assert infer(s.trace).period == 6
    assert infer(s.trace, max_period=5) is None


def test_wait_instead_of_get():
    s = Script(["a", "b"])
    for step in range(4):
        refs = [s.call("a", "f"), s.call("b", "f")]
        s.wait(refs, num_returns=2)
        s.get(refs)
    plan = infer(s.trace)
    assert plan.period == 4
    wait = plan.reactions[2]
    assert wait.op == "wait" and [i.passing for i in wait.reads] == ["wait", "wait"]
    assert plan.guard.expects[2].signature == ("Wait", 2, 2, False)
    different = Script(["a", "b"])
    for step in range(8):
        refs = [different.call("a", "f"), different.call("b", "f")]
        different.wait(refs, num_returns=1 + step % 2)
    assert infer(different.trace).period == 6


def test_a_period_that_creates_actors_is_no_pattern():
    s = Script()
    for step in range(6):
        s.create(f"a{step}")
        s.get(s.call(f"a{step}", "f"))
    assert infer(s.trace) is None
    s = Script(["a"])
    for step in range(6):
        s.create(f"b{step}")
        s.get(s.call("a", "f"))
    assert infer(s.trace) is None


def test_period_made_only_of_gets_is_not_a_plan():
    s = Script(["a"])
    x = s.call("a", "f")
    for step in range(5):
        s.get(x)
    assert infer(s.trace) is None


def test_nested_refs_are_passed_as_refs():
    s = Script(["a", "b"])
    for step in range(4):
        x = s.call("a", "f")
        s.get(s.call("b", "g", [x], 3, nested={0: [x.id]}))
    plan = infer(s.trace)
    g = plan.reactions[1]
    assert g.args[0].input is None and g.args[1].input is None
    (nested,) = g.args[0].nested
    assert nested.passing == "ref" and plan.connections[nested.connection].producer == 0


def test_external_refs():
    s = Script(["a"])
    outside = Ref("made-elsewhere")
    for step in range(4):
        s.get(s.call("a", "f", outside))
    plan = infer(s.trace)
    (ext,) = [c for c in plan.connections if c.source == "external"]
    assert plan.seeds(plan.end)[0].producer == -1 and s.trace.ref_id(-1) == "made-elsewhere"
    s = Script(["a"])
    for step in range(4):
        s.get(s.call("a", "f", Ref(f"elsewhere{step}")))
    assert infer(s.trace) is None


def test_keyword_arguments_and_num_returns():
    s = Script(["a"])
    for step in range(4):
        x, y = s.call("a", "split", num_returns=2)
        s.get(s.call("a", "join", left=x, right=y, scale=2.0))
    plan = infer(s.trace)
    join = plan.reactions[1]
    assert [a.name for a in join.args] == ["left", "right", "scale"]
    assert [plan.connections[a.input.connection].ret for a in join.args[:2]] == [0, 1]
    assert plan.connections[join.args[0].input.connection].actor_only
    s.call("a", "split", num_returns=3)
    assert not plan.guard.check(s.trace.events[-1])


DEVIATIONS = {
    "another actor": lambda s, refs: s.call("env1", "step", 1),
    "another method": lambda s, refs: s.call("env0", "reset"),
    "a ref for a literal": lambda s, refs: s.call("env0", "step", refs[0]),
    "another arity": lambda s, refs: s.call("env0", "step", 1, 2),
    "a keyword": lambda s, refs: s.call("env0", "step", x=1),
    "another num_returns": lambda s, refs: s.call("env0", "step", 1, num_returns=2),
    "a get for a call": lambda s, refs: s.get(refs[0]),
    "a put for a call": lambda s, refs: s.put(1),
}


@pytest.mark.parametrize("name", DEVIATIONS)
def test_guard_rejects_a_deviating_call(name):
    s = gym_script()
    plan = infer(s.trace)
    refs = [s.call("env0", "step", 1)]
    assert plan.guard.check(s.trace.events[-1])
    s.trace.events.pop()
    s.rec._next -= 1
    DEVIATIONS[name](s, refs)
    assert not plan.guard.check(s.trace.events[-1])


@pytest.mark.parametrize("shape", ["other ref", "single", "timeout", "fewer", "wait"])
def test_guard_rejects_a_deviating_get(shape):
    s = gym_script()
    plan = infer(s.trace)
    refs = [s.call(f"env{i}", "step", 1) for i in range(3)]
    index = len(s.trace.events)
    s.get(refs)
    assert plan.guard.check(s.trace.events[index])
    s.trace.events.pop()
    s.rec._next -= 1
    if shape == "other ref":
        s.get([refs[0], refs[1], refs[0]])
    elif shape == "single":
        s.get(refs[0])
    elif shape == "timeout":
        s.get(refs, timeout=1.0)
    elif shape == "fewer":
        s.get(refs[:2])
    else:
        s.wait(refs, num_returns=3)
    assert not plan.guard.check(s.trace.events[index])


def test_guard_ignores_literal_types_and_values():
    s = gym_script()
    plan = infer(s.trace)
    s.call("env0", "step", "a string now")
    assert plan.guard.check(s.trace.events[-1])


def test_blockers():
    s = Script()
    for step in range(4):
        s.get(s.call("ghost", "f"))
    assert "concurrency is unknown" in infer(s.trace).blockers[0]
    s = Script(["a"])
    for step in range(4):
        s.call("a", "gen", num_returns="dynamic")
    assert "not a fixed count" in infer(s.trace).blockers[0]


def test_bytes_ids_and_json_round_trip():
    s = Script([b"\x01\x02", b"\xff\x00"])
    for step in range(4):
        w = s.put(step)
        s.get([s.call(b"\x01\x02", "f", w), s.call(b"\xff\x00", "f", w)])
    plan = infer(s.trace)
    assert [r.name for r in plan.reactors] == [DRIVER, "actor:0102", "actor:ff00"]
    text = plan.to_json()
    json.loads(text)
    again = Trace.from_json(s.trace.to_json())
    assert infer(again).to_json() == text
    back = Plan.from_json(text)
    assert back.to_json() == text and back.describe() == plan.describe()
    assert all(back.guard.check(e) for e in again.events[back.start:])


def test_json_round_trip_is_equal():
    s = gym_script()
    plan = infer(s.trace)
    assert Plan.from_json(plan.to_json()) == plan


def test_describe_and_dot():
    s = Script(["a", "b"])
    obs = s.call("a", "reset")
    for step in range(4):
        act = s.call("b", "act", obs)
        obs = s.call("a", "step", act)
        s.get(obs)
    plan = infer(s.trace)
    text = plan.describe()
    assert "period of 3 events" in text and "actor:a" in text and "lag 1" in text
    dot = plan.to_dot()
    assert dot.startswith("digraph plan {") and dot.endswith("}")
    assert "style=dashed" in dot and 'label="actor:b"' in dot
    assert dot.count("->") == sum(len(c.uses) for c in plan.connections)


def test_find_period_reports_the_region():
    s = gym_script(rounds=5)
    period = find_period(s.trace)
    assert period.length == 4 and period.end == len(s.trace.events) and period.repeats >= 5


def test_recorder_indices_may_start_later():
    rec = Recorder(Ref, first_index=100)
    s = Script(["a", "b"], recorder=rec)
    for step in range(4):
        s.get([s.call("a", "f"), s.call("b", "f")])
    plan = infer(s.trace)
    assert plan.period == 3 and plan.start >= 100 and plan.end == 100 + len(s.trace.events)
    assert all(plan.guard.check(e) for e in s.trace.events[plan.start - 100:])


# -- random programs ----------------------------------------------------------

@st.composite
def loop_programs(draw):
    """A loop body over actors a0..a2 and a task; each step a call whose args
    are literals, earlier values of this iteration, values of 1 or 2 iterations
    ago, or a constant; the body ends with a get."""
    steps = []
    made = []                                   # (step index, ret) made earlier in this body
    for i in range(draw(st.integers(1, 5))):
        target = draw(st.sampled_from(["a0", "a1", "a2", "task"]))
        args = []
        for _ in range(draw(st.integers(0, 3))):
            choice = draw(st.sampled_from(["lit", "now", "carried", "const"]))
            if choice == "now" and made:
                args.append(("now", draw(st.sampled_from(made))))
            elif choice == "carried":
                args.append(("carried", draw(st.integers(1, 2)), draw(st.integers(0, 4))))
            elif choice == "const":
                args.append(("const",))
            else:
                args.append(("lit",))
        num_returns = draw(st.integers(1, 2))
        steps.append((target, args, num_returns))
        made += [(i, r) for r in range(num_returns)]
    reads = st.one_of(st.sampled_from(made).map(lambda m: ("now", m)),
                      st.tuples(st.just("carried"), st.integers(1, 2), st.sampled_from(made)))
    gets = draw(st.lists(reads, min_size=1, max_size=3))
    return steps, gets


def run_program(program, iterations):
    steps, gets = program
    s = Script(["a0", "a1", "a2"])
    const = s.put("const")
    history = [[[s.put(k)] * 2 for k in range(len(steps))] for _ in range(2)]   # two iterations of seeds
    for it in range(iterations):
        outs = []
        for target, args, num_returns in steps:
            values = []
            for arg in args:
                if arg[0] == "now":
                    values.append(outs[arg[1][0]][arg[1][1]])
                elif arg[0] == "carried":
                    old = history[-arg[1]]
                    step_outs = old[arg[2] % len(old)]
                    values.append(step_outs[0])
                elif arg[0] == "const":
                    values.append(const)
                else:
                    values.append(it)
            if target == "task":
                out = s.task("fn", *values, num_returns=num_returns)
            else:
                out = s.call(target, "m", *values, num_returns=num_returns)
            outs.append([out] if num_returns == 1 else list(out))
        got = []
        for kind, *where in gets:
            if kind == "now":
                got.append(outs[where[0][0]][where[0][1]])
            else:
                old = history[-where[0]]
                got.append(old[where[1][0] % len(old)][0])
        s.get(got)
        history.append(outs)
    return s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop_programs(), st.integers(2, 4), st.integers(1, 3))
def test_random_loops_infer_and_replay(program, repeats, slots):
    warmup = run_program(program, iterations=3 + repeats + 1)
    full = run_program(program, iterations=3 + repeats + 6)
    plan = infer(warmup.trace, repeats=repeats, task_slots=slots)
    assert plan is not None
    body = len(program[0]) + 1
    assert body % plan.period == 0
    assert all(plan.guard.check(e) for e in warmup.trace.events[plan.start:])
    replayed = replay_check(plan, full.trace)
    assert replayed == len(full.trace.events) - plan.end - (plan.switch - plan.phase) % plan.period
    crossing = in_flight(plan)
    for first in range(plan.start, plan.end):
        replay_check(plan, full.trace, first)
        seeds = [x for x in plan.seeds(first) if plan.connections[x.connection].source == "period"]
        assert crossing[plan.position(first)] == len(seeds)


def test_window_bounds_the_search():
    s = gym_script(actors=3, rounds=8)
    whole = infer(s.trace)
    recent = infer(s.trace, window=14)
    n = len(s.trace.events)
    assert recent.period == whole.period == 4 and recent.start >= n - 14
    assert recent.reactors == whole.reactors and recent.connections == whole.connections
    assert infer(s.trace, window=11) is None


def test_calls_whose_reads_follow_no_pattern_are_found_without_the_reads():
    # Pong-PG shaped: a put and three calls repeat, the waits take whichever result is ready first.
    s = Script(["a", "b", "c"])
    orders = [(0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 2, 1), (2, 1, 0), (1, 0, 2)]
    for order in orders:
        model = s.put()
        grads = [s.call(actor, "gradient", model) for actor in "abc"]
        pending = list(grads)
        for k in order:
            s.wait(pending)
            s.get(grads[k])
            pending.remove(grads[k])
    assert infer(s.trace) is None, "with its reads the trace has no period"
    calls = s.trace.without_reads()
    assert [type(e).__name__ for e in calls.events[-4:]] == ["Put", "Submit", "Submit", "Submit"]
    assert [e.index for e in calls.events] == list(range(calls.first_index, calls.first_index + len(calls.events)))
    # Refs are renamed with the events: each call names the put of its own round.
    for put, *submits in zip(*[iter(calls.events[3:])] * 4):
        assert all(sub.args[0] == RefArg(put.index, 0) for sub in submits)
        assert calls.ref_id(put.index) == put.ref_id
    plan = infer(calls)
    assert plan is not None and plan.period == 4 and plan.replayable
    assert not s.trace.reads_repeat(plan.start, plan.period, plan.repeats)


def test_reads_that_repeat_with_the_calls_are_kept_in_the_plan():
    s = Script(["a"])
    for step in range(6):
        s.get(s.call("a", "step", step))
    plan = infer(s.trace.without_reads())
    assert plan.period == 1
    assert s.trace.reads_repeat(plan.start, plan.period, plan.repeats)


def test_a_burst_of_identical_calls_is_no_loop_around_the_reads():
    # put, eight identical calls over it, a get of them all, round after round.
    s = Script()
    for i in range(3):
        w = s.put(i)
        s.get([s.task("score", w, k) for k in range(8)])
    calls = s.trace.without_reads()
    burst = infer(calls, repeats=2)
    assert burst.period == 1 and not s.trace.reads_among_calls(burst.start)    # the last round's calls alone
    loop = infer(calls, repeats=2, min_period=burst.end - burst.start)     # as the reactor looks again
    assert loop.period == 9 and s.trace.reads_among_calls(loop.start)        # put and eight calls, round by round
