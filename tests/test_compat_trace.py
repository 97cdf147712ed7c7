"""Unit tests of the trace format, digests and the trace diff (no Ray, no workers)."""

import json
import os
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

from rayreact.compat import diff
from rayreact.core import trace


# ---------------------------------------------------------------- digests

class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class ObjectRef:  # same type name as Ray's and rayreact's refs: digested by kind
    def __init__(self, ident):
        self.ident = ident


def test_digest_is_stable_and_sensitive():
    value = {"b": [1, 2.5, "x"], "a": (None, True, b"raw")}
    assert trace.digest(value) == trace.digest(dict(reversed(list(value.items()))))
    assert len(trace.digest(value)) == 16
    assert trace.digest(1) != trace.digest(1.0)
    assert trace.digest(1) != trace.digest(True)
    assert trace.digest([1, 2]) != trace.digest((1, 2))
    assert trace.digest("1") != trace.digest(1)
    assert trace.digest({1, 2, 3}) == trace.digest({3, 2, 1})
    assert trace.digest(0.1 + 0.2) != trace.digest(0.3)


def test_digest_of_arrays_uses_dtype_shape_and_bytes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert trace.digest(a) == trace.digest(a.copy())
    assert trace.digest(a) == trace.digest(np.asfortranarray(a))  # layout does not matter
    assert trace.digest(a) != trace.digest(a.reshape(4, 3))
    assert trace.digest(a) != trace.digest(a.astype(np.float64))
    b = a.copy()
    b[2, 3] += 1
    assert trace.digest(a) != trace.digest(b)
    assert trace.digest(np.float32(1.5)) != trace.digest(np.float64(1.5))
    assert trace.digest(np.array([Point(1, 2)], dtype=object)) == trace.digest(np.array([Point(1, 2)], dtype=object))


def test_digest_of_objects_by_type_and_state():
    assert trace.digest(Point(1, 2)) == trace.digest(Point(1, 2))
    assert trace.digest(Point(1, 2)) != trace.digest(Point(2, 1))
    assert trace.digest(Slotted(1, [2])) == trace.digest(Slotted(1, [2]))
    assert trace.digest(Slotted(1, [2])) != trace.digest(Slotted(1, [3]))
    assert trace.digest(OrderedDict(a=1)) != trace.digest({"a": 1})  # type name is part of it
    assert trace.digest(ValueError("x")) != trace.digest(KeyError("x"))


def test_refs_and_handles_digest_by_kind_only():
    assert trace.digest(ObjectRef(1)) == trace.digest(ObjectRef(2))
    assert trace.digest([ObjectRef(1)]) != trace.digest([1])


def test_cycles_do_not_recurse_forever():
    a = [1]
    a.append(a)
    p = Point(1, None)
    p.y = p
    assert trace.digest(a) == trace.digest(a)
    assert trace.digest(p) == trace.digest(p)


def test_digest_does_not_depend_on_hash_seed():
    code = ("from rayreact.core import trace; "
            "print(trace.digest({'s': {'alpha', 'beta', 'gamma', 'delta'}, 'f': frozenset([3.5, 'q'])}))")
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout.strip())
    assert len(outs) == 1


def test_preview_is_short_and_has_no_addresses():
    assert trace.preview(np.zeros((3, 4))) == "ndarray(float64, shape=(3, 4))"
    assert " at 0x" not in trace.preview(object())
    assert len(trace.preview("x" * 500)) <= 60


# ---------------------------------------------------------------- writing

def test_writer_appends_from_many_processes(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = trace.TraceWriter(path)
    writer.write({"kind": "task", "target": "parent"})
    children = []
    for child in range(4):
        pid = os.fork()
        if pid == 0:  # the child reuses the parent's writer: it must reopen, not share the descriptor
            try:
                for i in range(200):
                    writer.write({"kind": "task", "target": f"c{child}", "args": "x" * 200, "i": i})
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert status == 0
    events = trace.load(path)
    assert len(events) == 1 + 4 * 200
    for child in range(4):
        assert [e["i"] for e in events if e["target"] == f"c{child}"] == list(range(200))


def test_executing_records_result_and_error(tmp_path):
    writer = trace.TraceWriter(tmp_path / "t.jsonl")
    with trace.executing(writer, "task", "f", None, None, (1,), {"k": 2}) as call:
        call.set_result([1, 2])
    with pytest.raises(KeyError):
        with trace.executing(writer, "actor_call", "A#0", "m", 3, (), {}):
            raise KeyError("boom")
    ok, failed = trace.load(tmp_path / "t.jsonl")
    assert ok["result"] == trace.digest([1, 2]) and ok["args"] == trace.args_digest((1,), {"k": 2})
    assert failed["error"] == "KeyError" and "result" not in failed and failed["seq"] == 3


def test_actor_keys_count_per_class_and_nest_below_the_running_call(tmp_path):
    writer = trace.TraceWriter(tmp_path / "t.jsonl")
    top = [trace.actor_key("KeyTestA"), trace.actor_key("KeyTestB"), trace.actor_key("KeyTestA")]
    assert top == ["KeyTestA#0", "KeyTestB#0", "KeyTestA#1"]
    with trace.executing(writer, "actor_call", "KeyTestA#0", "spawn", 4, (), {}):
        nested = [trace.actor_key("KeyTestC"), trace.actor_key("KeyTestC")]
    assert nested == ["KeyTestA#0.spawn@4/KeyTestC#0", "KeyTestA#0.spawn@4/KeyTestC#1"]
    with trace.executing(writer, "task", "make", None, None, (7,), {}):
        in_task = trace.actor_key("KeyTestC")
    assert in_task == f"make({trace.args_digest((7,), {})[:8]})/KeyTestC#0"
    assert trace.actor_key("KeyTestC") == "KeyTestC#0"


def test_record_call_is_a_no_op_without_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(trace.ENV_VAR, raising=False)
    assert trace.active_writer() is None
    trace.record_call("task", "f", None, None, (), {}, result=1)
    monkeypatch.setenv(trace.ENV_VAR, str(tmp_path / "t.jsonl"))
    trace.record_call("task", "f", None, None, (), {}, error=ValueError("x"))
    [event] = trace.load(tmp_path / "t.jsonl")
    assert event["error"] == "ValueError"


def test_user_code_excludes_ray_and_rayreact_internals():
    assert trace.is_user_code("__main__") and trace.is_user_code("raytracing") and trace.is_user_code(None)
    assert not trace.is_user_code("ray.util.queue") and not trace.is_user_code("rayreact.util.queue")


# ---------------------------------------------------------------- diff

def ev(kind, target, method=None, seq=None, args="a", result="r", t=0, pid=1, **extra):
    e = {"kind": kind, "target": target, "method": method, "seq": seq, "args": args, "pid": pid, "t": t}
    if result.startswith("!"):
        e["error"] = result[1:]
    else:
        e["result"] = result
    e.update(extra)
    return e


def actor(key, calls, pid=1, t0=0, concurrent=False):
    events = [ev("actor_create", key, "__init__", 0, t=t0, pid=pid, concurrent=concurrent)]
    for i, (method, args, result) in enumerate(calls, start=1):
        events.append(ev("actor_call", key, method, i, args, result, t=t0 + i, pid=pid))
    return events


def compare(ray_runs, cand, **kw):
    return diff.compare_runs([diff.summarize(r) for r in ray_runs], diff.summarize(cand), **kw)


def test_equal_traces_compare_equal_in_any_event_order():
    run = actor("A#0", [("m", "1", "x"), ("m", "2", "y")]) + [ev("task", "f", args="1"), ev("task", "f", args="2")]
    result = compare([run, run], list(reversed(run)))
    assert not result.diverged
    assert {v.unit: v.projection for v in result.verdicts} == {"actor A#0": "exact", "task f": "multiset"}


def test_actor_call_order_difference_is_a_divergence_with_both_events():
    ray_run = actor("A#0", [("m", "1", "x"), ("m", "2", "y")])
    cand = actor("A#0", [("m", "2", "y"), ("m", "1", "x")])
    result = compare([ray_run, ray_run], cand)
    assert result.diverged
    first = result.first_divergence()
    assert first.unit == "actor A#0" and first.projection == "exact"
    assert any("ray:" in line and "[1]" in line for line in first.detail)
    assert any("rayreact:" in line and "[2]" in line for line in first.detail)


def test_result_difference_is_a_divergence():
    result = compare([actor("A#0", [("m", "1", "x")])], actor("A#0", [("m", "1", "DIFFERENT")]))
    assert result.diverged


def test_concurrent_actors_compare_as_multisets():
    ray_run = actor("A#0", [("m", "1", "x"), ("m", "2", "y")], concurrent=True)
    cand = actor("A#0", [("m", "2", "y"), ("m", "1", "x")], concurrent=True)
    result = compare([ray_run], cand)
    assert not result.diverged and result.verdicts[0].projection == "multiset"


def test_what_ray_runs_disagree_on_is_not_held_against_the_candidate():
    # Ray's two runs order the calls differently: only the multiset is compared.
    run1 = actor("A#0", [("m", "1", "x"), ("m", "2", "y")])
    run2 = actor("A#0", [("m", "2", "y"), ("m", "1", "x")])
    assert not compare([run1, run2], run2).diverged
    assert compare([run1, run2], actor("A#0", [("m", "1", "x"), ("m", "3", "z")])).diverged
    # Results that differ between Ray runs (e.g. time.time()) are not compared.
    t1 = [ev("task", "now", args="", result="t1")]
    t2 = [ev("task", "now", args="", result="t2")]
    verdict = compare([t1, t2], [ev("task", "now", args="", result="t3")]).verdicts[0]
    assert verdict.status == "equal" and verdict.projection == "calls multiset"


def test_units_only_some_ray_runs_have_are_nondeterministic():
    run1 = [ev("task", "f")] + [ev("task", "sometimes")]
    run2 = [ev("task", "f")]
    result = compare([run1, run2], [ev("task", "f")])
    assert not result.diverged
    assert result.counts()["nondeterministic"] == 1


def test_missing_and_extra_units_diverge():
    run = [ev("task", "f")]
    assert compare([run], []).first_divergence().status == "missing"
    assert compare([run], run + [ev("task", "g")]).first_divergence().status == "extra"


def test_restarted_actor_incarnations_are_ordered_by_creation():
    first = actor("A#0", [("m", "1", "x")], pid=10, t0=100)
    second = actor("A#0", [("m", "2", "y")], pid=11, t0=200)
    shuffled = second + first
    summary = diff.summarize(shuffled)
    calls = [(c.method, c.args) for c in summary.units["actor A#0"].calls]
    assert calls == [("__init__", "a"), ("m", "1"), ("__init__", "a"), ("m", "2")]


def test_after_a_partial_wait_order_is_compared_as_a_multiset():
    wait = {"kind": "wait", "partial": True, "pid": 0, "t": 3}
    ray_run = actor("A#0", [("m", "1", "x"), ("m", "2", "y"), ("m", "3", "z"), ("m", "4", "w")]) + [wait]
    swapped_after_wait = actor("A#0", [("m", "1", "x"), ("m", "2", "y"), ("m", "4", "w"), ("m", "3", "z")])
    swapped_before_wait = actor("A#0", [("m", "2", "y"), ("m", "1", "x"), ("m", "3", "z"), ("m", "4", "w")])
    result = compare([ray_run], swapped_after_wait)
    assert not result.diverged and result.verdicts[0].projection == "exact until wait()"
    assert compare([ray_run], swapped_before_wait).diverged


def test_stdout_comparison_ignores_worker_lines_and_lines_ray_runs_disagree_on():
    ray1 = "a\n(f pid=123) from worker\nelapsed 1.2 s\nb\n"
    ray2 = "a\nelapsed 1.5 s\n\x1b[36m(f pid=9)\x1b[0m other\nb\n"
    status, _ = diff.compare_stdout([ray1, ray2], "a\nelapsed 0.1 s\nb\n")
    assert status == "equal"
    status, detail = diff.compare_stdout([ray1, ray2], "a\nelapsed 0.1 s\nc\n")
    assert status == "diverged" and "rayreact: c" in detail[-1]
    assert diff.compare_stdout([ray1, "a\n"], "x\n")[0] == "not compared"


def test_measurements_in_any_unit_are_masked():
    lines = diff.stdout_lines("took 0.01 seconds\ntook 2 min\nused 512 MB\n90 calls per second\n"
                              "4000 env steps/sec\n3.2x faster\n10 items\nreward 21.0\n")
    assert lines[:6] == ["took <measured> seconds", "took <measured> min", "used <measured> MB",
                         "<measured> calls per second", "<measured> env steps/sec", "<measured>x faster"]
    assert lines[6:] == ["10 items", "reward 21.0"]          # results stay compared


def test_a_progress_count_that_follows_speed_is_reported_as_such_not_as_divergence():
    ray_out = "start\nProgress: 20%\nProgress: 40%\nProgress: 60%\nProgress: 80%\nsum 42\n"
    status, detail = diff.compare_stdout([ray_out, ray_out], "start\nProgress: 50%\nsum 42\n")
    assert status == "equal"
    assert any("Progress: <n>%" in line and "follows speed" in line for line in detail)
    # The result line after it is still compared, and equal counts are compared line by line.
    assert diff.compare_stdout([ray_out, ray_out], "start\nProgress: 50%\nsum 41\n")[0] == "diverged"
    two = "start\nepisode 1 reward 10\nepisode 2 reward 12\n"
    assert diff.compare_stdout([two, two], "start\nepisode 1 reward 10\nepisode 2 reward 13\n")[0] == "diverged"


def test_a_stdout_warning_names_the_calls_ray_ordered_differently():
    ray1 = actor("A#0", [("m", "1", "x"), ("m", "2", "y")])
    ray2 = actor("A#0", [("m", "2", "y"), ("m", "1", "x")])
    result = diff.compare_runs([diff.summarize(ray1), diff.summarize(ray2)], diff.summarize(ray1),
                               ["first x\nlast y\n", "first y\nlast y\n"], "first x\nlast x\n")
    assert result.stdout_status == "warning"
    assert "actor A#0" in result.stdout_detail[0] and "wait()" not in result.stdout_detail[0]


def test_exit_status_difference_diverges():
    run = [ev("task", "f")]
    result = compare([run], run, ray_exit_codes=[0], candidate_exit_code=1)
    assert result.diverged and result.exit_detail


def test_trace_file_lines_are_json(tmp_path):
    w = trace.TraceWriter(tmp_path / "t.jsonl")
    trace.record_wait(w, True)
    line = (tmp_path / "t.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["kind"] == "wait"


def test_call_counts_that_follow_timing_after_wait_are_a_warning_not_a_divergence():
    # An async parameter server: how often each worker is called depends on timing (wait()).
    wait = {"kind": "wait", "partial": True, "pid": 0, "t": 2}
    ray1 = actor("W#0", [("grad", "1", "a"), ("grad", "2", "b"), ("grad", "3", "c")]) + \
        actor("W#1", [("grad", "1", "a")], pid=2) + [wait]
    ray2 = actor("W#0", [("grad", "1", "a"), ("grad", "2", "b"), ("grad", "3", "c")]) + \
        actor("W#1", [("grad", "1", "a"), ("grad", "9", "z")], pid=2) + [wait]
    cand = actor("W#0", [("grad", "1", "a"), ("grad", "2", "b")]) + actor("W#1", [("grad", "1", "a")], pid=2)
    result = diff.compare_runs([diff.summarize(ray1), diff.summarize(ray2)], diff.summarize(cand),
                               ["loss 0.41\n", "loss 0.41\n"], "loss 0.40\n")
    assert not result.diverged
    assert result.counts()["warning"] == 1 and result.stdout_status == "warning"
    # Without wait() the same differences are divergences.
    no_wait = [e for e in ray1 if e["kind"] != "wait"]
    assert diff.compare_runs([diff.summarize(no_wait)], diff.summarize(cand)).diverged
    # A method Ray never ran is a divergence even then.
    other = cand + [ev("actor_call", "W#1", "explode", 5, t=9, pid=2)]
    assert diff.compare_runs([diff.summarize(ray1), diff.summarize(ray2)], diff.summarize(other)).diverged


def test_an_actor_left_without_calls_after_wait_is_a_warning_not_a_divergence():
    # An Ape-X loop pauses whichever explorer is ahead: whether one gets another call after wait() is timing.
    wait = {"kind": "wait", "partial": True, "pid": 0, "t": 2}
    ray_run = actor("E#0", [("explore", "1", "a"), ("explore", "2", "b"), ("explore", "3", "c")]) + [wait]
    cand = actor("E#0", [("explore", "1", "a")])
    result = diff.compare_runs([diff.summarize(ray_run), diff.summarize(ray_run)], diff.summarize(cand))
    assert not result.diverged and result.counts()["warning"] == 1
    # Without wait() the missing call is a divergence, and so is a method Ray never ran after it.
    no_wait = [e for e in ray_run if e["kind"] != "wait"]
    assert diff.compare_runs([diff.summarize(no_wait)], diff.summarize(cand)).diverged
    other = cand + [ev("actor_call", "E#0", "explode", 5, t=9)]
    assert diff.compare_runs([diff.summarize(ray_run), diff.summarize(ray_run)], diff.summarize(other)).diverged


def test_calls_that_start_after_a_kill_are_not_compared():
    # Ray's kill is asynchronous: the call sent after it ran there (t=3 > kill at t=2.5).
    ray_run = actor("A#0", [("m", "1", "x"), ("m", "2", "y"), ("m", "3", "z")]) + \
        [{"kind": "kill", "target": "A#0", "pid": 9, "t": 2}]
    cand = actor("A#0", [("m", "1", "x")])
    result = compare([ray_run, ray_run], cand)
    assert not result.diverged
    # Calls before the kill still count.
    assert compare([ray_run], actor("A#0", [("m", "1", "DIFFERENT")])).diverged
