"""infer_blocks: loops whose blocks of calls come in any order, found in synthetic traces (pure; no processes).

The traces are made by driving a real ``Recorder`` as the runtime does (``test_infer.Script``); which call
"finishes" first comes from a seeded random generator, as it would from timing.
"""

import random

import pytest

from rayreact.core.infer import infer, infer_pooled
from rayreact.core.infer_blocks import find_blocks, infer_blocks, lay_out
from rayreact.core.infer_pools import find_pooled
from rayreact.core.plan import ANY_POSITION
from rayreact.core.record import Submit

from test_infer import Script

EXPLORERS = ["e0", "e1", "e2"]


def apex(steps, seed=0, weights_every=5):
    """Ape-X's driver: whichever finished gets its next call; the learner's next step is a sample fed to train;
    every few learner steps the weights are refreshed, and explorers start from the latest weights."""
    s = Script()
    s.create("buffer", cls="ReplayBuffer")
    s.create("learner", cls="Learner")
    for e in EXPLORERS:
        s.create(e, cls="Explorer")
    weights = s.call("learner", "get_weights")
    in_flight = {s.call(e, "explore", weights, 100): e for e in EXPLORERS}
    in_flight[s.call("learner", "train", s.call("buffer", "sample", 128))] = "learner"
    rng = random.Random(seed)
    learned = 0
    for _ in range(steps):
        refs = list(in_flight)
        s.wait(refs)
        ready = refs[rng.randrange(len(refs))] if rng.random() < 0.3 else next(
            r for r, who in in_flight.items() if who == "learner")
        who = in_flight.pop(ready)
        s.get([ready])
        if who == "learner":
            learned += 1
            if learned % weights_every == 0:
                weights = s.call("learner", "get_weights")
            in_flight[s.call("learner", "train", s.call("buffer", "sample", 128))] = "learner"
        else:
            in_flight[s.call(who, "explore", weights, 100)] = who
    return s.trace


def test_apex_calls_are_three_blocks_in_any_order():
    calls = apex(200).without_reads()
    found = find_blocks(calls)
    assert found is not None
    # A fixed period or a completion-order loop found at the end spans only the latest run of one block.
    for plan in (infer(calls, repeats=2), find_pooled(calls, repeats=2)):
        assert plan is None or plan.end - plan.start < (found.end - found.start) // 4
    methods = sorted(tuple(sig[3] for sig in block) for block in found.blocks)
    assert methods == [("explore",), ("get_weights",), ("sample", "train")]
    assert found.length == 4 and found.end == calls.first_index + len(calls.events)


def test_the_layout_repeats_and_its_plan_relays_what_crosses_blocks():
    calls = apex(200).without_reads()
    found = find_blocks(calls)
    laid, placeholders, _ = lay_out(calls, found)
    assert laid.first_index == calls.first_index
    assert [e.index for e in laid.events] == list(range(laid.first_index, laid.first_index + len(laid.events)))
    # Every real call is there once, renumbered; the placeholders make nothing.
    real = [e for e in laid.events if type(e) is Submit and e.index not in placeholders]
    assert all(set(laid.event(i).ref_ids) == {None} for i in placeholders)
    assert sorted(e.ref_ids for e in real) == sorted(e.ref_ids for e in calls.events if type(e) is Submit)
    plan, _, _ = infer_blocks(calls)
    by_method = {r.target: r for r in plan.reactions}
    train, explore = by_method["train"], by_method["explore"]
    (sample_read,) = train.inputs()
    assert plan.connections[sample_read.connection].source == "period" and sample_read.lag == 0
    (weights_read,) = explore.inputs()
    relay = plan.connections[weights_read.connection]
    assert relay.source == "relay" and relay.producer == ANY_POSITION      # any weights the driver holds
    assert [p.members for p in plan.pools] == [tuple(EXPLORERS)] or {
        m for p in plan.pools for m in p.members} == {f"actor:{e}" for e in EXPLORERS}


@pytest.mark.parametrize("seed", range(4))
def test_a_placeholder_copies_its_block_with_refs_inside_it_moved(seed):
    calls = apex(120, seed=seed).without_reads()
    found = find_blocks(calls)
    laid, placeholders, _ = lay_out(calls, found)
    for e in laid.events[found.start - laid.first_index:]:
        assert type(e) is Submit
        if e.target == "train":
            (ref,) = e.args
            # train always reads the sample just before it, real or placeholder
            assert ref.producer == e.index - 1 and laid.event(ref.producer).target == "sample"


def test_calls_that_end_inside_a_block_wait_for_its_end():
    s = Script()
    s.create("buffer", cls="ReplayBuffer")
    s.create("learner", cls="Learner")
    s.create("e0", cls="Explorer")
    rng = random.Random(3)
    for _ in range(40):
        if rng.random() < 0.5:
            s.call("learner", "train", s.call("buffer", "sample", 1))
        else:
            s.call("e0", "explore", 1)
        s.get([])
    assert find_blocks(s.trace.without_reads()) is not None
    s.call("buffer", "sample", 1)
    assert find_blocks(s.trace.without_reads()) is None


def test_a_fixed_period_is_one_block_and_no_plan_of_blocks():
    s = Script()
    for a in ("a", "b"):
        s.create(a)
    for _ in range(20):
        s.call("a", "step", 1)
        s.call("b", "step", 1)
    assert find_blocks(s.trace.without_reads()) is None


def test_a_task_or_put_ends_the_region_before_it():
    s = Script()
    s.create("a")
    s.create("b")
    rng = random.Random(0)
    for k in range(30):
        s.call("a" if rng.random() < 0.5 else "b", "step" if k % 2 else "look", 1)
    s.put(1)
    assert find_blocks(s.trace.without_reads()) is None        # nothing after the put


def test_the_plan_of_blocks_begins_where_the_calls_end():
    calls = apex(200).without_reads()
    plan, laid, held = infer_blocks(calls)
    assert plan.replayable, plan.blockers
    assert plan.reads_excluded and len(plan.blocks) == 3
    assert len(calls.events) * 0.9 < held <= len(calls.events)
    assert plan.end == laid.first_index + len(laid.events) and plan.switch == plan.phase
    assert plan.phase in plan.blocks or plan.phase == 0
    assert "blocks of calls taken in any order" in plan.describe()


@pytest.mark.parametrize("seed", range(4))
def test_the_plan_names_the_positions_where_its_blocks_begin(seed):
    # The plan counts positions from its own region's start: each block begins where its first call sits there.
    plan, _, _ = infer_blocks(apex(150, seed=seed).without_reads())
    begins = sorted(plan.reactions[q].target for q in plan.blocks)
    assert begins == ["explore", "get_weights", "sample"]


def test_a_first_call_made_once_is_no_block():
    # obs = env.step(0), then act -> step(ref) for ever: one block and a call never made again, no loop of blocks.
    s = Script()
    s.create("env")
    s.create("policy", cls="Policy")
    obs = s.call("env", "step", 0)
    for _ in range(30):
        obs = s.call("env", "step", s.call("policy", "act", obs))
        s.get([obs])
    assert find_blocks(s.trace.without_reads()) is None
