"""record: the Recorder turns API calls into plain events naming producers.

Most tests drive a Recorder directly with a plain ref class (test data).  The
last one records a real loop on each backend (real ObjectRefs) and infers it.
"""

import gc
import importlib
import sys
import weakref

import pytest

from rayreact.core.infer import infer
from rayreact.core.record import (ACTOR_METHOD, TASK, ActorCreate, ActorInfo, ActorKill, Get, Literal, Put,
                                  RefArg, Recorder, Submit, Trace, Wait, produces, ref_slots, signature)


class Ref:
    __slots__ = ("id", "__weakref__")

    def __init__(self, ref_id):
        self.id = ref_id

    def binary(self):
        return self.id


class Payload:
    """A value we can watch for being kept alive."""


def test_refs_become_producer_references():
    rec = Recorder(Ref)
    rec.on_submit(TASK, "f", None, (1,), {}, 2, ["r0", "r1"])
    rec.on_put([1, 2], "p0")
    rec.on_submit(ACTOR_METHOD, "m", "actor", (Ref("r1"), Ref("p0")), {"k": Ref("r0"), "x": 2.5}, 1, ["r2"])
    f, put, m = rec.trace.events
    assert f == Submit(0, f.call_site, TASK, "f", None, (Literal("int"),), (), 2, ("r0", "r1"))
    assert put == Put(1, put.call_site, "list", (), "p0")
    assert m.args == (RefArg(0, 1), RefArg(1, 0))
    assert m.kwargs == (("k", RefArg(0, 0)), ("x", Literal("float")))
    assert ref_slots(m) == (RefArg(0, 1), RefArg(1, 0), RefArg(0, 0))
    assert produces(f) == 2 and produces(put) == 1 and produces(m) == 1
    assert rec.next_index == 3


def test_external_refs_are_numbered_once():
    rec = Recorder(Ref)
    rec.on_get([Ref("outside"), Ref("elsewhere"), Ref("outside")])
    (get,) = rec.trace.events
    assert get.refs == (RefArg(-1), RefArg(-2), RefArg(-1))
    assert rec.trace.externals == ["outside", "elsewhere"]
    assert rec.trace.ref_id(-2) == "elsewhere"


def test_get_and_wait_shapes():
    rec = Recorder(Ref)
    rec.on_submit(TASK, "f", None, (), {}, 1, ["a"])
    rec.on_get(Ref("a"))
    rec.on_get([Ref("a")], timeout=0.5)
    rec.on_wait([Ref("a")], num_returns=1, timeout=None)
    rec.on_wait([Ref("a")], num_returns=1, timeout=0)
    _, single, listed, wait, polled = rec.trace.events
    assert (single.single, single.timeout) == (True, False)
    assert (listed.single, listed.timeout) == (False, True)
    assert signature(single) != signature(listed)
    assert wait == Wait(3, wait.call_site, (RefArg(0),), 1, False)
    assert polled.timeout and signature(polled) != signature(wait)


def test_nested_refs_are_kept_apart_from_direct_ones():
    rec = Recorder(Ref)
    rec.on_submit(TASK, "f", None, (), {}, 1, ["a"])
    rec.on_submit(TASK, "g", None, ([Ref("a")], Ref("a")), {"opts": {"r": Ref("a")}}, 1, ["b"],
                  nested={0: ["a"], "opts": ["a"]})
    rec.on_put({"inner": Ref("b")}, "c", nested_ids=["b"])
    _, g, put = rec.trace.events
    assert g.args == (Literal("list", (RefArg(0),)), RefArg(0))
    assert g.kwargs == (("opts", Literal("dict", (RefArg(0),))),)
    assert ref_slots(g) == (RefArg(0), RefArg(0), RefArg(0))
    assert signature(g)[5] == (1, "ref")
    assert put.nested == (RefArg(1),)


def test_signature_ignores_literal_types_and_call_sites():
    rec = Recorder(Ref)
    rec.on_submit(ACTOR_METHOD, "m", "a", (1,), {"k": "x"}, 1, ["r0"], call_site="here:1")
    rec.on_submit(ACTOR_METHOD, "m", "a", (1.5,), {"k": None}, 1, ["r1"], call_site="there:2")
    rec.on_submit(ACTOR_METHOD, "m", "a", (1,), {"j": "x"}, 1, ["r2"], call_site="here:1")
    one, two, three = rec.trace.events
    assert signature(one) == signature(two) != signature(three)


def test_actor_lifecycle_events_never_repeat():
    rec = Recorder(Ref, actors={"old": ActorInfo("Old")})
    rec.on_actor_create("Env", "a", (1,), {"seed": 3}, max_concurrency=4)
    rec.on_actor_kill("a")
    rec.on_actor_kill("a")
    create, kill1, kill2 = rec.trace.events
    assert create == ActorCreate(0, create.call_site, "Env", "a", (Literal("int"),), (("seed", Literal("int")),), 4, False)
    assert isinstance(kill1, ActorKill) and signature(kill1) != signature(kill2)
    assert rec.trace.actors["a"].concurrent and not rec.trace.actors["old"].concurrent
    assert ActorInfo("X", is_async=True).concurrent


def test_call_site_is_the_users_frame(tmp_path, monkeypatch):
    (tmp_path / "fake_runtime.py").write_text(
        "def submit(rec):\n"
        "    rec.on_submit('task', 'f', None, (), {}, 1, ['r'])\n"
        "def get(rec):\n"
        "    rec.on_get([])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    runtime = importlib.import_module("fake_runtime")
    rec = Recorder(Ref, internal=(str(tmp_path),))
    line = sys._getframe().f_lineno + 1
    runtime.submit(rec); runtime.get(rec)
    assert [e.call_site for e in rec.trace.events] == [f"{__file__}:{line}"] * 2
    assert Recorder(Ref).call_site().startswith(__file__)


def test_the_recorder_keeps_no_values_and_no_refs():
    rec = Recorder(Ref)
    value, ref = Payload(), Ref("r")
    watch_value, watch_ref = weakref.ref(value), weakref.ref(ref)
    rec.on_submit(TASK, "f", None, (value, ref), {"v": value}, 1, ["out"])
    rec.on_put(value, "p")
    rec.on_get([ref])
    rec.on_wait([ref])
    del value, ref
    gc.collect()
    assert watch_value() is None and watch_ref() is None


def test_first_index_offsets_every_index():
    rec = Recorder(Ref, first_index=40)
    rec.on_submit(TASK, "f", None, (), {}, 1, ["a"])
    rec.on_get(Ref("a"))
    assert [e.index for e in rec.trace.events] == [40, 41]
    assert rec.trace.events[1].refs == (RefArg(40),)
    assert rec.trace.event(41) is rec.trace.events[1]
    assert rec.trace.ref_id(40) == "a"


def test_ref_id_of_a_non_producer_fails():
    rec = Recorder(Ref)
    rec.on_get([])
    rec.on_submit(TASK, "f", None, (), {}, 1, ["a"])
    with pytest.raises(LookupError):
        rec.trace.ref_id(0)
    with pytest.raises(LookupError):
        rec.trace.ref_id(1, 1)


def test_trace_json_round_trip():
    rec = Recorder(Ref)
    rec.on_actor_create("Env", b"\x01\x02")
    rec.on_submit(ACTOR_METHOD, "m", b"\x01\x02", (Ref(b"\xaa"), [1]), {"k": 1}, 2, [b"\x10", b"\x11"],
                  nested={1: [b"\xaa"]})
    rec.on_put(3, b"\x12")
    rec.on_get([Ref(b"\x10"), Ref(b"\x12")], timeout=1)
    rec.on_wait([Ref(b"\x11")], 1)
    rec.on_actor_kill(b"\x01\x02")
    back = Trace.from_json(rec.trace.to_json())
    assert back.to_json() == rec.trace.to_json()
    assert [type(e) for e in back.events] == [type(e) for e in rec.trace.events]
    assert back.events[1].args == (RefArg(-1), Literal("list", (RefArg(-1),)))
    assert back.events[1].actor == "0102" and back.externals == ["aa"]
    assert back.actors == {"0102": ActorInfo("Env")}
    assert isinstance(back.events[3], Get) and back.events[3].timeout


def test_records_a_real_loop(ray_backend):
    """Real ObjectRefs of either backend: ids, producers, and the inferred plan."""
    ray = ray_backend

    @ray.remote
    class Env:
        def __init__(self, seed):
            self.state = seed

        def step(self, action):
            self.state += action
            return self.state

    @ray.remote
    def total(*values):
        return sum(values)

    rec = Recorder(ray.ObjectRef)
    envs = [Env.remote(i) for i in range(3)]
    for i, env in enumerate(envs):
        rec.on_actor_create("Env", f"env{i}", (i,))
    results = []
    for step in range(5):
        refs = []
        for i, env in enumerate(envs):
            ref = env.step.remote(1)
            rec.on_submit(ACTOR_METHOD, "step", f"env{i}", (1,), {}, 1, [ref.binary()])
            refs.append(ref)
        summed = total.remote(*refs)
        rec.on_submit(TASK, "total", None, tuple(refs), {}, 1, [summed.binary()])
        results.append(ray.get(summed))
        rec.on_get(summed)
    assert results == [3 + 3 * (k + 1) for k in range(5)]
    plan = infer(rec.trace)
    assert plan is not None and plan.period == 5 and plan.replayable
    reduce = plan.reactions[3]
    assert reduce.reactor == "task:0" and all(a.input is not None for a in reduce.args)
    assert all(plan.connections[a.input.connection].actor_only for a in reduce.args)
    assert all(plan.guard.check(e) for e in rec.trace.events[plan.start:])
