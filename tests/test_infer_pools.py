"""infer_pools: completion-order loops found in synthetic traces (pure; no processes).

The traces are made by driving a real ``Recorder`` as the runtime does (``test_infer.Script``); the order in
which calls "finish" comes from a seeded random generator, as it would from timing.
"""

import random

import pytest

from rayreact.core.infer import infer
from rayreact.core.infer_pools import MAX_WINDOW, find_pooled

from test_infer import Script

WORKERS = ["w0", "w1", "w2", "w3"]


def async_parameter_server(updates, seed=0, workers=WORKERS, order=None):
    """The asynchronous parameter-server loop: wait for any gradient, apply it, resubmit to its worker."""
    s = Script()
    s.create("ps", cls="ParameterServer")
    for w in workers:
        s.create(w, cls="DataWorker")
    weights = s.call("ps", "get_weights")
    in_flight = {s.call(w, "compute_gradients", weights): w for w in workers}
    rng = random.Random(seed)
    for i in range(updates):
        refs = list(in_flight)
        s.wait(refs)
        ready = refs[order(i) if order else rng.randrange(len(refs))]
        worker = in_flight.pop(ready)
        weights = s.call("ps", "apply_gradients", ready)
        in_flight[s.call(worker, "compute_gradients", weights)] = worker
    return s.trace


def test_an_asynchronous_parameter_server_is_a_completion_order_loop():
    trace = async_parameter_server(60)
    assert infer(trace, repeats=2) is None               # no fixed period: the worker follows completion order
    pattern = find_pooled(trace, repeats=2)
    assert pattern is not None and pattern.length == 3
    assert pattern.repeats >= 8
    (pool,) = pattern.pools
    assert pool.class_name == "DataWorker" and pool.method == "compute_gradients"
    assert set(pool.members) == set(WORKERS)
    wait_at = next(q for q in range(3) if trace.event(pattern.start + q).__class__.__name__ == "Wait")
    # The wait's refs and the apply's ref name the compute position; the compute's weights are relative.
    assert {q for q, _, _ in pattern.varying} == {wait_at, (wait_at + 1) % 3}
    assert {made for _, _, made in pattern.varying} == {pool.position}
    reason = pattern.reason()
    assert "completion order" in reason and "whichever of 4 DataWorker actors" in reason
    assert "not replayed" in reason and reason == find_pooled(async_parameter_server(90, seed=1)).reason()


def test_a_fixed_rotation_is_no_completion_order_loop():
    # Workers finishing in turn: infer finds the fixed period (four iterations), and nothing varies.
    trace = async_parameter_server(60, order=lambda i: 0)
    assert infer(trace, repeats=2) is not None
    assert find_pooled(trace, repeats=2) is None


def test_too_short_a_region_is_not_taken_for_one():
    # Three periods of a four-member pool could still turn out a fixed rotation: wait for more.
    assert find_pooled(async_parameter_server(6), repeats=2) is None


@pytest.mark.parametrize("seed", range(5))
def test_a_loop_of_fixed_actors_is_never_pooled(seed):
    # Round-robin over actors of one class, with loop-carried refs at a fixed distance: infer's business.
    s = Script()
    for a in ("a", "b", "c"):
        s.create(a, cls="Env")
    rng = random.Random(seed)
    refs = {a: s.call(a, "reset") for a in "abc"}
    for _ in range(30):
        for a in "abc":
            refs[a] = s.call(a, "step", refs[a], rng.random())
        s.get(list(refs.values()))
    assert infer(s.trace, repeats=2) is not None
    assert find_pooled(s.trace, repeats=2) is None


def test_a_ref_that_stops_changing_is_no_completion_order():
    # b.g(x) reads a.f's latest result for a while, then the same old one: a phase change, not a pool.
    s = Script()
    for a in ("a", "b"):
        s.create(a, cls="Env")
    for i in range(40):
        x = s.call("a", "f") if i < 20 else s.call("a", "f") and x
        s.get(s.call("b", "g", x))
    assert find_pooled(s.trace, repeats=2) is None


def test_the_search_is_bounded_and_whichever_actor_is_free_is_a_pool_even_with_no_ref_varying():
    # ActorPool.map_unordered's shape: a random choice among eight workers of one class, each call read at
    # once.  No ref varies, but the actors follow no rotation; the search covers a bounded window however
    # long the trace.
    s = Script()
    for k in range(8):
        s.create(f"w{k}", cls="Worker")
    rng = random.Random(3)
    for _ in range(3000):
        s.get(s.call(f"w{rng.randrange(8)}", "f", 1))
    pattern = find_pooled(s.trace, repeats=2)
    assert pattern is not None and pattern.length == 2 and pattern.varying == ()
    (pool,) = pattern.pools
    assert set(pool.members) == {f"w{k}" for k in range(8)}
    assert pattern.start >= s.trace.first_index + len(s.trace.events) - MAX_WINDOW


def test_a_fixed_rotation_with_no_ref_is_no_pool():
    s = Script()
    for k in range(3):
        s.create(f"w{k}", cls="Worker")
    for i in range(300):
        s.get(s.call(f"w{i % 3}", "f", i))
    assert find_pooled(s.trace, repeats=2) is None


# ---------------------------------------------------------------------- the plan of such a loop
from rayreact.core import admission                      # noqa: E402
from rayreact.core.infer import infer_pooled             # noqa: E402
from rayreact.core.plan import Plan                      # noqa: E402


def test_the_plan_of_a_completion_order_loop_pools_the_workers_and_relays_the_varying_ref():
    trace = async_parameter_server(60).without_reads()
    plan = infer_pooled(trace, find_pooled(trace, repeats=2))
    assert plan.replayable and admission.refusals(plan, trace) == ()
    (pool,) = plan.pools
    assert set(pool.members) == {f"actor:{w}" for w in WORKERS}
    for name in pool.members:                    # each member runs the pooled position, and nothing else
        assert plan.reactor(name).schedule == (pool.position,)
    assert plan.reactions[pool.position].reactor == pool.name
    (relay,) = [c for c in plan.connections if c.source == "relay"]
    assert relay.producer == pool.position and relay.reactor == "driver"
    (use,) = relay.uses
    assert use.reactor == "actor:ps" and use.lag == 0
    # The pool's results have no fixed reader (they go to the driver, which relays them).
    assert not plan.connections[plan.reactions[pool.position].outputs[0]].uses
    assert plan.seeds(plan.end) == [] or all(plan.connections[s.connection].source != "relay"
                                             for s in plan.seeds(plan.end))
    assert Plan.from_json(plan.to_json()) == plan
    # The guard takes every later period, whichever worker is called and however far back the ref reaches.
    longer = async_parameter_server(90).without_reads()
    checked = [plan.guard.check(e) for e in longer.events[plan.end - longer.first_index:]]
    assert checked and all(checked)


def test_the_guard_of_a_pool_refuses_another_class_and_a_ref_of_another_position():
    trace = async_parameter_server(60).without_reads()
    plan = infer_pooled(trace, find_pooled(trace, repeats=2))
    (pool,) = plan.pools
    s = Script()
    s.create("ps", cls="ParameterServer")
    s.create("stranger", cls="DataWorker")
    ev = trace.events[-1]
    pooled = ev if plan.position(ev.index) == pool.position else trace.events[-2]
    assert plan.guard.check(pooled)
    import dataclasses
    assert not plan.guard.check(dataclasses.replace(pooled, actor="stranger"))
    relayed_at = next(c.uses[0].position for c in plan.connections if c.source == "relay")
    reader = next(e for e in reversed(trace.events) if plan.position(e.index) == relayed_at)
    arg = reader.args[0]
    wrong = dataclasses.replace(arg, producer=arg.producer - 1)        # made by the other position
    assert not plan.guard.check(dataclasses.replace(reader, args=(wrong,)))


def test_a_pool_of_threaded_actors_is_described_not_replayed():
    s = Script()
    s.create("ps", cls="ParameterServer")
    for w in WORKERS:
        s.create(w, cls="DataWorker", max_task_retries=2)
    weights = s.call("ps", "get_weights")
    in_flight = {s.call(w, "compute_gradients", weights): w for w in WORKERS}
    rng = random.Random(0)
    for _ in range(60):
        refs = list(in_flight)
        s.wait(refs)
        ready = refs[rng.randrange(len(refs))]
        worker = in_flight.pop(ready)
        weights = s.call("ps", "apply_gradients", ready)
        in_flight[s.call(worker, "compute_gradients", weights)] = worker
    trace = s.trace.without_reads()
    pattern = find_pooled(trace, repeats=2)
    plan = infer_pooled(trace, pattern)
    refused = admission.refusals(plan, trace)
    assert any("retried" in r for r in refused), refused
    assert "not replayed (" in pattern.reason(refused)
