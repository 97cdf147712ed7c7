"""Remote functions and the core calls: ``remote``, ``options``, ``get``, ``put``, ``wait``, ``cancel``.

Every expectation here was checked against real Ray 2.60; the same test runs
on rayreact.  Error types are Ray's own (e.g. a bare ``@remote()`` is an
``AssertionError`` in Ray, not a ``TypeError``).
"""

import os
import time

import pytest

from conftest import backend_fixture, wait_for_file, wait_until

ray_backend = backend_fixture(replay=True, colocate=True)


def add(a, b=10):
    return a + b


def pair():
    return 1, 2


def triple(x):
    return x, x * 2, x * 3


# --- remote() and options -------------------------------------------------------------


def test_remote_bare_decorator_makes_a_remote_function(ray_backend):
    f = ray_backend.remote(add)
    assert ray_backend.get(f.remote(1, 2)) == 3


def test_remote_with_options_decorator(ray_backend):
    f = ray_backend.remote(num_cpus=1, max_retries=0)(add)
    assert ray_backend.get(f.remote(5)) == 15


def test_remote_called_directly_is_an_error(ray_backend):
    f = ray_backend.remote(add)
    with pytest.raises(TypeError):
        f(1, 2)


def test_remote_with_empty_parentheses_is_rejected(ray_backend):
    # Ray insists on either bare @ray.remote or at least one option.
    with pytest.raises(AssertionError):
        ray_backend.remote()(add)


def test_remote_rejects_unknown_option(ray_backend):
    with pytest.raises(ValueError, match="not_an_option"):
        ray_backend.remote(not_an_option=1)(add)


def test_options_rejects_unknown_option(ray_backend):
    f = ray_backend.remote(add)
    with pytest.raises(ValueError, match="not_an_option"):
        f.options(not_an_option=1)


def test_options_returns_a_modified_copy(ray_backend):
    f = ray_backend.remote(pair)
    two = f.options(num_returns=2)
    assert two is not f
    refs = two.remote()
    assert isinstance(refs, list) and len(refs) == 2
    assert ray_backend.get(refs) == [1, 2]
    # The original keeps its single return.
    single = f.remote()
    assert isinstance(single, ray_backend.ObjectRef)
    assert ray_backend.get(single) == (1, 2)


def test_options_copies_are_independent(ray_backend):
    f = ray_backend.remote(num_returns=3)(triple)
    one = f.options(num_returns=1)
    three = f.options(max_retries=0)  # keeps the decorator's num_returns=3
    assert ray_backend.get(one.remote(2)) == (2, 4, 6)
    assert ray_backend.get(three.remote(2)) == [2, 4, 6]
    assert ray_backend.get(f.remote(1)) == [1, 2, 3]


def test_num_returns_in_decorator(ray_backend):
    f = ray_backend.remote(num_returns=3)(triple)
    a, b, c = f.remote(1)
    assert ray_backend.get([c, b, a]) == [3, 2, 1]


def test_num_returns_zero_returns_none(ray_backend):
    f = ray_backend.remote(num_returns=0)(lambda: None)
    assert f.remote() is None


# --- generators filling a fixed number of return values (Ray's documented rules) ---------


def count_up(n, fail_at=None):
    for i in range(n):
        if i == fail_at:
            raise KeyError("boom")
        yield i


def count_up_once_failing(n, fail_at, marker):
    """Fails at ``fail_at`` on its first run only (the marker file remembers the first run)."""
    first_run = not os.path.exists(marker)
    open(marker, "a").close()
    for i in range(n):
        if first_run and i == fail_at:
            raise KeyError("first run")
        yield i


def big_items_once_failing(n, fail_at, marker):
    """Items too large to travel inline (each in a shared segment); fails like ``count_up_once_failing``."""
    for i in count_up_once_failing(n, fail_at, marker):
        yield bytes([i]) * 300_000


def outcomes(ray, refs):
    out = []
    for ref in refs:
        try:
            out.append(ray.get(ref))
        except ray.exceptions.RayTaskError as err:
            out.append(type(err.cause).__name__)
    return out


class Counting:
    def count_up(self, n, fail_at=None):
        yield from count_up(n, fail_at)


def test_generator_fills_the_returns_in_order(ray_backend):
    f = ray_backend.remote(count_up)
    assert outcomes(ray_backend, f.options(num_returns=3).remote(3)) == [0, 1, 2]
    assert ray_backend.get(f.options(num_returns=1).remote(1)) == 0


def test_generator_that_fails_keeps_what_it_yielded(ray_backend):
    f = ray_backend.remote(max_retries=0)(count_up)
    assert outcomes(ray_backend, f.options(num_returns=3).remote(3, fail_at=1)) == [0, "KeyError", "KeyError"]
    actor = ray_backend.remote(Counting).remote()
    refs = actor.count_up.options(num_returns=3).remote(3, fail_at=2)
    assert outcomes(ray_backend, refs) == [0, 1, "KeyError"]


def test_generator_that_stops_early_fails_only_the_refs_it_did_not_fill(ray_backend):
    f = ray_backend.remote(max_retries=0)(count_up)
    assert outcomes(ray_backend, f.options(num_returns=3).remote(2)) == [0, 1, "ValueError"]
    assert outcomes(ray_backend, [f.options(num_returns=1).remote(0)]) == ["ValueError"]


def test_generator_items_past_num_returns_are_dropped(ray_backend):
    f = ray_backend.remote(count_up)
    assert outcomes(ray_backend, f.options(num_returns=2).remote(5)) == [0, 1]
    assert ray_backend.get(f.options(num_returns=1).remote(2)) == 0


def test_dynamic_generator_error_is_its_last_item(ray_backend):
    f = ray_backend.remote(max_retries=0)(count_up)
    items = list(ray_backend.get(f.options(num_returns="dynamic").remote(3, fail_at=2)))
    assert outcomes(ray_backend, items) == [0, 1, "KeyError"]
    items = list(ray_backend.get(f.options(num_returns="dynamic").remote(3, fail_at=0)))
    assert outcomes(ray_backend, items) == ["KeyError"]


@pytest.mark.parametrize("num_returns, expected", [(3, [0, "KeyError", "KeyError"]), ("dynamic", [0, 1, 2])])
def test_only_a_dynamic_generator_is_retried_for_its_error(ray_backend, tmp_path, num_returns, expected):
    # Ray keeps what a generator filled into fixed returns and never retries it; a dynamic one is retried.
    f = ray_backend.remote(max_retries=1, retry_exceptions=[KeyError])(count_up_once_failing)
    refs = f.options(num_returns=num_returns).remote(3, 1, str(tmp_path / "ran"))
    if num_returns == "dynamic":
        refs = list(ray_backend.get(refs))
    assert outcomes(ray_backend, refs) == expected


def test_retried_dynamic_generator_with_large_items(ray_backend, tmp_path):
    f = ray_backend.remote(max_retries=1, retry_exceptions=True)(big_items_once_failing)
    items = list(ray_backend.get(f.options(num_returns="dynamic").remote(3, 2, str(tmp_path / "ran"))))
    assert [bytes(v) for v in ray_backend.get(items)] == [bytes([i]) * 300_000 for i in range(3)]


def test_remote_returns_an_object_ref_at_once(ray_backend, signal):
    waiter = ray_backend.remote(lambda s: ray_backend.get(s.wait.remote()) or "done")
    ref = waiter.remote(signal)
    assert isinstance(ref, ray_backend.ObjectRef)
    ready, not_ready = ray_backend.wait([ref], timeout=0.5)
    assert ready == [] and not_ready == [ref]
    signal.send.remote()
    assert ray_backend.get(ref, timeout=60) == "done"


def test_lambda_and_closure_tasks(ray_backend):
    offset = 7
    f = ray_backend.remote(lambda x: x + offset)
    assert ray_backend.get(f.remote(1)) == 8


def test_keyword_arguments_and_defaults(ray_backend):
    f = ray_backend.remote(add)
    assert ray_backend.get(f.remote(a=1)) == 11
    assert ray_backend.get(f.remote(1, b=1)) == 2


# --- arity errors at submission ------------------------------------------------------


def test_missing_argument_raises_type_error_at_submission(ray_backend):
    f = ray_backend.remote(add)
    with pytest.raises(TypeError):
        f.remote()


def test_too_many_arguments_raise_type_error_at_submission(ray_backend):
    f = ray_backend.remote(add)
    with pytest.raises(TypeError):
        f.remote(1, 2, 3)


def test_unexpected_keyword_raises_type_error_at_submission(ray_backend):
    f = ray_backend.remote(add)
    with pytest.raises(TypeError, match="c"):
        f.remote(1, c=3)


# --- get ------------------------------------------------------------------------------


def test_get_single_and_list(ray_backend):
    f = ray_backend.remote(add)
    refs = [f.remote(i, 0) for i in range(5)]
    assert ray_backend.get(refs[3]) == 3
    assert ray_backend.get(refs) == [0, 1, 2, 3, 4]


def test_get_empty_list(ray_backend):
    assert ray_backend.get([]) == []


def test_get_list_with_duplicates(ray_backend):
    ref = ray_backend.put("x")
    other = ray_backend.put("y")
    assert ray_backend.get([ref, other, ref, ref]) == ["x", "y", "x", "x"]


def test_get_rejects_non_refs(ray_backend):
    with pytest.raises(ValueError):
        ray_backend.get(1)


def test_get_timeout_raises_get_timeout_error(ray_backend, signal):
    ref = signal.wait.remote()
    with pytest.raises(ray_backend.exceptions.GetTimeoutError) as info:
        ray_backend.get(ref, timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, ray_backend.exceptions.RayError)
    signal.send.remote()
    assert ray_backend.get(ref, timeout=60) is None


def test_get_timeout_zero_on_pending_object(ray_backend, signal):
    ref = signal.wait.remote()
    with pytest.raises(TimeoutError):
        ray_backend.get([ray_backend.put(1), ref], timeout=0)
    signal.send.remote()


def test_get_timeout_on_ready_object_returns_value(ray_backend):
    ref = ray_backend.put(42)
    assert ray_backend.get(ref, timeout=0) == 42


# --- put ------------------------------------------------------------------------------


def test_put_get_roundtrip(ray_backend):
    values = [None, 0, "text", b"\x00bytes", [1, [2, 3]], {"k": (1, 2)}, 3.5, {1, 2}, ("t",)]
    assert ray_backend.get([ray_backend.put(v) for v in values]) == values


def test_put_returns_object_ref(ray_backend):
    assert isinstance(ray_backend.put(1), ray_backend.ObjectRef)


def test_put_of_an_object_ref_is_rejected(ray_backend):
    with pytest.raises(TypeError):
        ray_backend.put(ray_backend.put(1))


def test_put_value_passed_to_tasks(ray_backend):
    ref = ray_backend.put(5)
    f = ray_backend.remote(add)
    assert ray_backend.get([f.remote(ref, 1), f.remote(ref, 2)]) == [6, 7]


# --- wait -----------------------------------------------------------------------------


def test_wait_returns_ready_and_pending(ray_backend, signal):
    pending = signal.wait.remote()
    done = ray_backend.put(1)
    ready, not_ready = ray_backend.wait([pending, done], num_returns=1, timeout=30)
    assert ready == [done]
    assert not_ready == [pending]
    signal.send.remote()


def test_wait_default_num_returns_is_one(ray_backend):
    refs = [ray_backend.put(i) for i in range(3)]
    ready, not_ready = ray_backend.wait(refs)
    assert len(ready) == 1 and len(not_ready) == 2
    assert set(ready + not_ready) == set(refs)


def test_wait_keeps_input_order(ray_backend, signal):
    pending = signal.wait.remote()
    a, b, c = ray_backend.put("a"), ray_backend.put("b"), ray_backend.put("c")
    ready, not_ready = ray_backend.wait([c, pending, a, b], num_returns=3, timeout=30)
    assert ready == [c, a, b]
    assert not_ready == [pending]
    # With more ready than asked for, which ones come back is Ray's choice, but
    # both lists still follow the input order.
    given = [b, pending, c, a]
    ready, not_ready = ray_backend.wait(given, num_returns=2, timeout=30)
    assert len(ready) == 2 and pending in not_ready
    assert ready == [r for r in given if r in ready]
    assert not_ready == [r for r in given if r in not_ready]
    signal.send.remote()


def test_wait_timeout_returns_fewer_than_num_returns(ray_backend, signal):
    pending = [signal.wait.remote() for _ in range(2)]
    done = ray_backend.put(0)
    ready, not_ready = ray_backend.wait([pending[0], done, pending[1]], num_returns=3, timeout=0.3)
    assert ready == [done]
    assert not_ready == pending
    signal.send.remote()
    ready, not_ready = ray_backend.wait(pending, num_returns=2, timeout=60)
    assert ready == pending and not_ready == []


def test_wait_num_returns_all(ray_backend):
    f = ray_backend.remote(add)
    refs = [f.remote(i) for i in range(4)]
    ready, not_ready = ray_backend.wait(refs, num_returns=4, timeout=60)
    assert ready == refs and not_ready == []


def test_wait_rejects_duplicates(ray_backend):
    ref = ray_backend.put(1)
    with pytest.raises(ValueError):
        ray_backend.wait([ref, ref])


def test_wait_rejects_num_returns_above_length(ray_backend):
    with pytest.raises(ValueError):
        ray_backend.wait([ray_backend.put(1)], num_returns=2)


def test_wait_rejects_a_single_ref(ray_backend):
    with pytest.raises(TypeError):
        ray_backend.wait(ray_backend.put(1))


def test_wait_empty_list(ray_backend):
    assert ray_backend.wait([]) == ([], [])


# --- cancel ---------------------------------------------------------------------------


def test_cancel_queued_task(ray_backend, gate):
    # Two blockers occupy both CPUs (blocking outside get(), which would lend the
    # CPU back), so the third task is still queued when cancelled.
    blocker = ray_backend.remote(num_cpus=1)(wait_for_file)
    blockers = [blocker.remote(gate.path) for _ in range(2)]
    queued = ray_backend.remote(add).remote(1)
    ray_backend.cancel(queued)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(queued, timeout=60)
    gate.open()
    ray_backend.get(blockers, timeout=60)


def test_force_cancel_running_task(ray_backend, signal):
    started = ray_backend.remote(Counter).remote()

    def mark_and_block(counter, signal):
        ray_backend.get(counter.incr.remote())
        ray_backend.get(signal.wait.remote())

    task = ray_backend.remote(max_retries=0)(mark_and_block)
    ref = task.remote(started, signal)
    wait_until(lambda: ray_backend.get(started.value.remote()) == 1)
    ray_backend.cancel(ref, force=True)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(ref, timeout=60)


def test_cancel_finished_task_keeps_result(ray_backend):
    ref = ray_backend.remote(add).remote(1, 1)
    assert ray_backend.get(ref) == 2
    ray_backend.cancel(ref)
    assert ray_backend.get(ref) == 2


class Gated:
    """An actor whose ``hold`` blocks until a file appears, noting whether it saw its own cancellation."""

    def __init__(self):
        self.log = []

    def hold(self, path, started, backend, noticed=None):
        import importlib
        context = importlib.import_module(backend).get_runtime_context()
        open(started, "w").close()
        seen = False
        while not os.path.exists(path):
            if not seen and context.is_canceled():
                seen = True
                if noticed:
                    open(noticed, "w").close()
            time.sleep(0.01)
        self.log.append(("hold", seen))
        return "held"

    def note(self, x):
        self.log.append(("note", x))
        return x

    def history(self):
        return self.log


def test_cancel_of_actor_calls_running_and_queued(ray_backend, gate, tmp_path):
    # Ray 2.60: an actor call is never interrupted (an actor has state) but sees is_canceled(),
    # and ray.get of a cancelled call raises TaskCancelledError, whether it ran or not.
    actor = ray_backend.remote(Gated).remote()
    started, noticed = tmp_path / "started", tmp_path / "noticed"
    running = actor.hold.remote(gate.path, str(started), ray_backend.__name__, str(noticed))
    queued = actor.note.remote(7)
    untouched = actor.note.remote(8)
    wait_for_file(started)
    ray_backend.cancel(running)
    ray_backend.cancel(queued)
    wait_for_file(noticed)                # the running call sees its cancellation before the gate opens
    gate.open()
    for ref in (running, queued):
        with pytest.raises(ray_backend.exceptions.TaskCancelledError):
            ray_backend.get(ref, timeout=60)
    assert ray_backend.get(untouched, timeout=60) == 8
    history = ray_backend.get(actor.history.remote())
    assert history[0] == ("hold", True)
    assert ("note", 8) in history
    ray_backend.cancel(untouched)                     # finished: nothing happens
    assert ray_backend.get(untouched) == 8


def test_force_cancel_of_an_actor_call_is_refused(ray_backend, gate, tmp_path):
    actor = ray_backend.remote(Gated).remote()
    started = tmp_path / "started"
    ref = actor.hold.remote(gate.path, str(started), ray_backend.__name__)
    wait_for_file(started)
    with pytest.raises(ValueError, match="force=True is not supported for actor tasks"):
        ray_backend.cancel(ref, force=True)
    gate.open()
    assert ray_backend.get(ref, timeout=60) == "held"


class AsyncSleeper:
    async def sleep(self, seconds, started):
        import asyncio
        open(started, "w").close()
        try:
            await asyncio.sleep(seconds)
            return "slept"
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def was_cancelled(self):
        return getattr(self, "cancelled", False)


def test_cancel_of_an_async_actor_call_cancels_its_coroutine(ray_backend, tmp_path):
    actor = ray_backend.remote(AsyncSleeper).remote()
    assert ray_backend.get(actor.was_cancelled.remote()) is False
    started = tmp_path / "started"
    ref = actor.sleep.remote(120, str(started))
    wait_for_file(started)
    ray_backend.cancel(ref)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(ref, timeout=60)
    assert ray_backend.get(actor.was_cancelled.remote()) is True


def test_is_canceled_is_for_workers_only(ray_backend):
    with pytest.raises(RuntimeError):
        ray_backend.get_runtime_context().is_canceled()


class Counter:
    def __init__(self):
        self.n = 0

    def incr(self):
        self.n += 1
        return self.n

    def value(self):
        return self.n


# --- runtime context and cluster views ------------------------------------------------


def test_runtime_context_in_driver(ray_backend):
    ctx = ray_backend.get_runtime_context()
    assert isinstance(ctx.get_job_id(), str) and ctx.get_job_id()
    assert isinstance(ctx.get_node_id(), str) and ctx.get_node_id()
    assert ctx.get_actor_id() is None
    with pytest.raises(RuntimeError):
        ctx.current_actor


def test_runtime_context_in_tasks(ray_backend):
    def ids():
        ctx = ray_backend.get_runtime_context()
        return ctx.get_job_id(), ctx.get_task_id(), ctx.get_actor_id(), ctx.get_node_id()

    f = ray_backend.remote(ids)
    (job1, task1, actor1, node1), (job2, task2, _, node2) = ray_backend.get([f.remote(), f.remote()])
    driver = ray_backend.get_runtime_context()
    assert job1 == job2 == driver.get_job_id()
    assert node1 == node2 == driver.get_node_id()
    assert isinstance(task1, str) and isinstance(task2, str) and task1 != task2
    assert actor1 is None


def test_cluster_resources_shape(ray_backend):
    total = ray_backend.cluster_resources()
    assert total["CPU"] == 2.0
    assert all(isinstance(v, float) for v in total.values())
    assert "memory" in total and "object_store_memory" in total


def test_available_resources_shape(ray_backend):
    total = ray_backend.cluster_resources()
    wait_until(lambda: ray_backend.available_resources().get("CPU") == 2.0)
    avail = ray_backend.available_resources()
    assert all(isinstance(v, float) for v in avail.values())
    assert all(avail[k] <= total[k] for k in avail)


def test_available_resources_reflect_a_running_task(ray_backend, gate):
    ref = ray_backend.remote(num_cpus=1)(wait_for_file).remote(gate.path)
    wait_until(lambda: ray_backend.available_resources().get("CPU") == 1.0)
    gate.open()
    ray_backend.get(ref, timeout=60)
    wait_until(lambda: ray_backend.available_resources().get("CPU") == 2.0)


def test_nodes_shape(ray_backend):
    nodes = ray_backend.nodes()
    assert isinstance(nodes, list) and len(nodes) == 1
    node = nodes[0]
    assert node["Alive"] is True
    assert node["NodeID"] == ray_backend.get_runtime_context().get_node_id()
    assert node["Resources"]["CPU"] == 2.0


def test_get_gpu_ids_in_driver_without_gpus(ray_backend):
    assert ray_backend.get_gpu_ids() == []


def test_tasks_run_in_other_processes(ray_backend):
    f = ray_backend.remote(lambda: os.getpid())
    pids = set(ray_backend.get([f.remote() for _ in range(4)]))
    assert os.getpid() not in pids


def test_tasks_run_in_parallel(ray_backend):
    # Two tasks that each wait for the other can only both finish if they run at once.
    barrier = ray_backend.remote(Rendezvous).remote(2)

    def meet(barrier, i):
        ray_backend.get(barrier.arrive.remote())
        return i

    meet = ray_backend.remote(num_cpus=1)(meet)
    assert sorted(ray_backend.get([meet.remote(barrier, 0), meet.remote(barrier, 1)], timeout=60)) == [0, 1]


class Rendezvous:
    """Async actor: ``arrive`` returns once ``parties`` callers have arrived."""

    def __init__(self, parties):
        import asyncio
        self.parties = parties
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def arrive(self):
        import asyncio
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_here.set()
        await asyncio.wait_for(self.all_here.wait(), 30)
        return True


def test_tasks_submit_tasks(ray_backend):
    def outer(n):
        inner = ray_backend.remote(add)
        return sum(ray_backend.get([inner.remote(i, 0) for i in range(n)]))

    assert ray_backend.get(ray_backend.remote(outer).remote(4)) == 6


def test_timeline_is_callable(ray_backend):
    ray_backend.get(ray_backend.remote(add).remote(1))
    assert isinstance(ray_backend.timeline(), list)
