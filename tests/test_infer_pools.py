"""infer_pools: completion-order loops found in synthetic traces (pure; no processes).

The traces are made by driving a real ``Recorder`` as the runtime does (``test_infer.Script``); the order in
which calls "finish" comes from a seeded random generator, as it would from timing.
"""

import random

import pytest

from rayreact.core.infer import infer
from rayreact.core.infer_pools import find_pooled

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
    assert "not replayed yet" in reason and reason == find_pooled(async_parameter_server(90, seed=1)).reason()


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


def test_the_search_is_bounded():
    # A random choice among eight workers of one class, each call read at once: nothing varies, and the
    # search covers a bounded window however long the trace.
    s = Script()
    for k in range(8):
        s.create(f"w{k}", cls="Worker")
    rng = random.Random(3)
    for _ in range(3000):
        s.get(s.call(f"w{rng.randrange(8)}", "f", 1))
    assert find_pooled(s.trace, repeats=2) is None
