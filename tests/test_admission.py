"""admission: the one place that decides whether a plan replays (pure; no processes)."""

from rayreact.core import admission
from rayreact.core.infer import infer
from rayreact.core.record import Trace

from test_infer import Script


def test_tasks_anywhere_in_the_graph_are_admitted():
    s = Script(["env", "policy"])
    obs = s.call("env", "reset")
    for step in range(4):
        view = s.task("pick", obs)                       # a task fed by an actor's result
        chained = s.task("g", s.task("f", step))         # a task fed by a task
        obs = s.call("env", "step", s.call("policy", "act", view), chained)   # task results feed actors
        s.get(obs)
    plan = infer(s.trace)
    assert plan.replayable, "the pattern is a fixed reactor graph"
    assert admission.refusals(plan, s.trace) == ()


def test_task_options_the_engine_does_not_honour_are_named():
    s = Script()
    for step in range(4):
        s.get(s.task("f", step))
    s.rec.on_task_options("f", ["num_cpus", "name"])
    plan = infer(s.trace)
    assert plan.replayable
    (reason,) = admission.refusals(plan, s.trace)
    assert "a task with options num_cpus" in reason
    s.rec.on_task_options("f", ["max_retries", "name", "num_returns"])
    assert admission.refusals(infer(s.trace), s.trace) == ()


def test_an_actor_whose_calls_may_be_retried_is_admitted_unless_it_reads_itself_or_runs_calls_concurrently():
    s = Script()
    s.create("r", max_task_retries=3)
    for step in range(4):
        s.get(s.call("r", "f"))
    plan = infer(s.trace)
    assert plan.replayable
    assert admission.refusals(plan, s.trace) == ()      # its calls in flight at a death run again (replay_rerun)
    s = Script()
    s.create("r", max_task_retries=3)
    state = s.call("r", "reset")
    for step in range(4):
        state = s.call("r", "f", state)                 # a value that would die with the actor
        s.get(state)
    plan = infer(s.trace)
    assert plan.replayable
    assert "reads its own results" in admission.refusals(plan, s.trace)[0]
    s = Script()
    s.create("t", max_concurrency=4, max_task_retries=1)
    for step in range(4):
        s.get(s.call("t", "f"))
    plan = infer(s.trace)
    assert plan.replayable
    (reason,) = admission.refusals(plan, s.trace)
    assert "threaded or async actor whose calls may be retried" in reason


def test_threaded_and_async_actors_are_admitted():
    for options in ({"max_concurrency": 4}, {"is_async": True}):
        s = Script()
        s.create("t", **options)
        for step in range(4):
            s.get(s.call("t", "f", step))
        plan = infer(s.trace)
        assert plan.replayable and plan.reactor("actor:t").concurrent, options
        assert admission.refusals(plan, s.trace) == (), options


def test_refs_nested_in_call_arguments_and_in_puts_are_admitted_unless_the_put_is_passed_nested():
    s = Script(["a", "b"])
    for step in range(4):
        x = s.call("a", "f", step)
        s.get(s.call("b", "g", [x], nested={0: [x.id]}))
    plan = infer(s.trace)
    assert admission.refusals(plan, s.trace) == ()
    (nested,) = plan.reactions[1].args[0].nested
    assert plan.connections[nested.connection].to_driver       # the driver keeps it for a callee that keeps the ref

    s = Script(["a", "b"])
    for step in range(4):
        x = s.call("a", "f", step)
        s.get(s.call("b", "g", s.put([x], nested_ids=[x.id])))
    plan = infer(s.trace)
    assert admission.refusals(plan, s.trace) == ()
    assert plan.connections[plan.reactions[1].reads[0].connection].to_driver

    s = Script(["a", "b"])
    for step in range(4):
        x = s.call("a", "f", step)
        p = s.put([x], nested_ids=[x.id])
        s.get(s.call("b", "g", [p], nested={0: [p.id]}))
    assert any("its own ref passed nested" in r for r in admission.refusals(infer(s.trace), s.trace))


def test_a_generator_call_has_no_fixed_outputs():
    s = Script(["a"])
    for step in range(4):
        s.call("a", "gen", num_returns=-1)
    assert "not a fixed count" in infer(s.trace).blockers[0]


def test_the_trace_keeps_task_options_and_retry_settings_through_json():
    s = Script()
    s.create("r", max_task_retries=2)
    s.rec.on_task_options("f", ["num_cpus"])
    back = Trace.from_json(s.trace.to_json())
    assert back.task_options == {"f": frozenset(["num_cpus"])}
    assert back.actors["r"].max_task_retries == 2


def _loop_of_gets(times_per_event):
    s = Script(["a"])
    for step in range(4):
        s.get(s.call("a", "f", step))
    s.trace.times[:] = [k * times_per_event for k in range(len(s.trace.events))]
    return s


def test_the_cost_rule_declines_a_loop_of_calls_that_take_hundreds_of_ms():
    slow = _loop_of_gets(0.15)                  # a call and its get each 150 ms apart: 300 ms per call
    plan = infer(slow.trace)
    assert plan.replayable, "the pattern itself is a fixed graph"
    (reason,) = admission.refusals(plan, slow.trace)
    assert "100 ms or more" in reason and "replay would save under 0.1%" in reason
    calls_alone = slow.trace.without_reads()
    assert calls_alone.times == [t for t, e in zip(slow.trace.times, slow.trace.events)
                                 if type(e).__name__ not in ("Get", "Wait")]
    fast = _loop_of_gets(0.0002)
    assert admission.refusals(infer(fast.trace), fast.trace) == ()


def test_the_cost_rule_leaves_out_the_first_period_and_waits_for_a_second_to_judge_by():
    s = _loop_of_gets(0.0002)
    plan = infer(s.trace)
    first = plan.start - s.trace.first_index
    for k in range(first + 1, len(s.trace.times)):
        s.trace.times[k] += 5.0         # the first call's get waited 5 s for its actor to start
    assert admission.refusals(plan, s.trace) == () and not admission.cost_unclear(plan, s.trace)
    two = Script(["a"])
    for step in range(2):
        two.get(two.call("a", "f", step))
    two.trace.times[:] = [0.0, 0.0, 5.0, 5.0, 5.0001]
    plan = infer(two.trace, repeats=2)
    assert plan.repeats == 2
    assert admission.cost_unclear(plan, two.trace)      # only the first period to go by, and it was slow
    assert admission.refusals(plan, two.trace) == ()


def test_the_cost_rule_needs_the_times_of_the_events():
    loaded = Trace.from_json(_loop_of_gets(0.15).trace.to_json())    # a trace read from a file has no times
    assert loaded.times == []
    assert admission.refusals(infer(loaded), loaded) == ()
    assert loaded.without_reads().events and loaded.without_reads().times == []
