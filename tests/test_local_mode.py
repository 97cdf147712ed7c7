"""``local_mode=True``: everything in the driver process, one call at a time, Ray's semantics unchanged.

Ray 2.60 removed local mode (``init(local_mode=True)`` raises there; see
test_init.py), so the ``ray`` run of this module uses Ray's normal mode: the
expectations are the ones real Ray meets, and rayreact must meet them in
local mode too (copies, ordering, errors).  No test here blocks one call on a
later one: in local mode a call runs to completion when it is submitted.
"""

import asyncio
import os
import threading

import numpy as np
import pytest

from conftest import backend_fixture, wait_until

ray_backend = backend_fixture(per_backend={"rayreact": {"local_mode": True}})


class Log:
    def __init__(self, initial=None):
        self.entries = list(initial or [])

    def add(self, x):
        self.entries.append(x)
        return len(self.entries)

    def entries_so_far(self):
        return self.entries

    def fail(self):
        raise KeyError("actor method failed")


class BadInit:
    def __init__(self):
        raise ValueError("constructor failed in local mode")

    def method(self):
        return "unreachable"


class AsyncBox:
    def __init__(self):
        self.queue = asyncio.Queue()

    async def put(self, item):
        await self.queue.put(item)

    async def get_or_none(self):
        try:
            return await asyncio.wait_for(self.queue.get(), 0.1)
        except asyncio.TimeoutError:
            return None

    async def resolve(self, box):
        return await box[0]


class LocalError(Exception):
    pass


def raise_local_error(message):
    raise LocalError(message)


def test_where_calls_run(ray_backend):
    # The one intended difference: local mode runs calls in the driver process.
    in_driver = ray_backend.__name__ == "rayreact"
    task_pid = ray_backend.get(ray_backend.remote(lambda: os.getpid()).remote())
    assert (task_pid == os.getpid()) == in_driver


def test_tasks_and_num_returns(ray_backend):
    add = ray_backend.remote(lambda a, b: a + b)
    assert ray_backend.get([add.remote(i, i) for i in range(4)]) == [0, 2, 4, 6]
    pair = ray_backend.remote(num_returns=2)(lambda: ("a", "b"))
    assert ray_backend.get(pair.remote()) == ["a", "b"]
    assert ray_backend.get(pair.options(num_returns=1).remote()) == ("a", "b")


def test_refs_direct_resolved_nested_not(ray_backend):
    ref = ray_backend.put(3)

    def inspect(direct, nested):
        return direct, isinstance(nested[0], ray_backend.ObjectRef), ray_backend.get(nested[0])

    assert ray_backend.get(ray_backend.remote(inspect).remote(ref, [ref])) == (3, True, 3)


def test_task_chain(ray_backend):
    inc = ray_backend.remote(lambda x: x + 1)
    ref = ray_backend.put(0)
    for _ in range(5):
        ref = inc.remote(ref)
    assert ray_backend.get(ref) == 5


def test_wait(ray_backend):
    refs = [ray_backend.remote(lambda i: i).remote(i) for i in range(3)]
    ready, not_ready = ray_backend.wait(refs, num_returns=3, timeout=30)
    assert ready == refs and not_ready == []
    with pytest.raises(ValueError):
        ray_backend.wait([refs[0], refs[0]])


def test_put_snapshot(ray_backend):
    arr = np.zeros(100_000)
    lst = [1]
    arr_ref, lst_ref = ray_backend.put(arr), ray_backend.put(lst)
    arr[0] = 5.0
    lst.append(2)
    assert ray_backend.get(arr_ref)[0] == 0.0
    assert ray_backend.get(lst_ref) == [1]


def test_argument_copies_both_ways(ray_backend):
    def mutate(lst, dct):
        lst.append("callee")
        dct["callee"] = 1
        return lst

    lst, dct = ["caller"], {}
    assert ray_backend.get(ray_backend.remote(mutate).remote(lst, dct)) == ["caller", "callee"]
    assert lst == ["caller"] and dct == {}


def test_arrays_are_read_only(ray_backend):
    got = ray_backend.get(ray_backend.put(np.ones(1000)))
    assert not got.flags.writeable
    with pytest.raises(ValueError):
        got[0] = 0.0

    def writeable(arr):
        return arr.flags.writeable

    assert ray_backend.get(ray_backend.remote(writeable).remote(np.ones(1000))) is False
    caller = np.ones(1000)
    ray_backend.get(ray_backend.remote(lambda a: a.copy().fill(0)).remote(caller))
    assert caller.flags.writeable and caller[0] == 1.0


def test_actor_state_and_order(ray_backend):
    log = ray_backend.remote(Log).remote()
    slow = ray_backend.remote(lambda: sum(range(10_000)) and "computed")
    refs = [log.add.remote(slow.remote())] + [log.add.remote(i) for i in range(5)]
    assert ray_backend.get(refs) == [1, 2, 3, 4, 5, 6]
    assert ray_backend.get(log.entries_so_far.remote()) == ["computed", 0, 1, 2, 3, 4]


def test_actor_state_is_a_copy(ray_backend):
    initial = ["a"]
    log = ray_backend.remote(Log).remote(initial)
    initial.append("changed by caller")
    got = ray_backend.get(log.entries_so_far.remote())
    assert got == ["a"]
    got.append("changed after get")
    assert ray_backend.get(log.entries_so_far.remote()) == ["a"]


def test_handles_passed_to_tasks_and_actors(ray_backend):
    log = ray_backend.remote(Log).remote()

    def use(handle, x):
        return ray_backend.get(handle.add.remote(x))

    class Forwarder:
        def __init__(self, target):
            self.target = target

        def forward(self, x):
            return ray_backend.get(self.target.add.remote(x))

    assert ray_backend.get(ray_backend.remote(use).remote(log, "task")) == 1
    forwarder = ray_backend.remote(Forwarder).remote(log)
    assert ray_backend.get(forwarder.forward.remote("actor")) == 2
    assert ray_backend.get(log.entries_so_far.remote()) == ["task", "actor"]


def test_method_num_returns(ray_backend):
    class Split:
        @ray_backend.method(num_returns=2)
        def split(self):
            return "x", "y"

    x, y = ray_backend.remote(Split).remote().split.remote()
    assert ray_backend.get([y, x]) == ["y", "x"]


def test_task_error_semantics(ray_backend):
    ref = ray_backend.remote(raise_local_error).remote("local failure")  # raises only at get
    with pytest.raises(LocalError) as info:
        ray_backend.get(ref)
    assert isinstance(info.value, ray_backend.exceptions.RayTaskError)
    assert "local failure" in str(info.value) and "raise_local_error" in str(info.value)
    assert isinstance(info.value.cause, LocalError)
    dependent = ray_backend.remote(lambda x: x).remote(ref)
    with pytest.raises(LocalError):
        ray_backend.get(dependent)


def test_actor_error_semantics(ray_backend):
    log = ray_backend.remote(Log).remote()
    with pytest.raises(KeyError) as info:
        ray_backend.get(log.fail.remote())
    assert isinstance(info.value, ray_backend.exceptions.RayTaskError)
    assert ray_backend.get(log.add.remote("still alive")) == 1
    bad = ray_backend.remote(BadInit).remote()
    with pytest.raises(ray_backend.exceptions.RayActorError) as info:
        ray_backend.get(bad.method.remote())
    assert "constructor failed in local mode" in str(info.value)


def test_submission_errors(ray_backend):
    log = ray_backend.remote(Log).remote()
    with pytest.raises(AttributeError):
        log.nope.remote()
    with pytest.raises(TypeError):
        log.add.remote()
    with pytest.raises(TypeError):
        ray_backend.remote(lambda x: x).remote(1, 2)
    with pytest.raises(TypeError):
        ray_backend.remote(lambda x: x).remote(threading.Lock())


def test_named_actor_and_kill(ray_backend):
    log = ray_backend.remote(Log).options(name="local-log").remote()
    assert ray_backend.get(ray_backend.get_actor("local-log").add.remote(1)) == 1
    with pytest.raises(ValueError):
        ray_backend.remote(Log).options(name="local-log").remote()
    ray_backend.kill(log)

    def dead():
        # Ray's kill is asynchronous: a call sent right after it may still run.
        try:
            ray_backend.get(log.add.remote(2), timeout=60)
        except ray_backend.exceptions.RayActorError:
            return True
        return False

    wait_until(dead)


def test_async_actor_keeps_one_event_loop(ray_backend):
    box = ray_backend.remote(AsyncBox).remote()
    assert ray_backend.get(box.get_or_none.remote()) is None  # waits on the queue once
    assert ray_backend.get(box.get_or_none.remote()) is None
    ray_backend.get(box.put.remote("item"))
    assert ray_backend.get(box.get_or_none.remote()) == "item"
    assert ray_backend.get(box.resolve.remote([ray_backend.put("awaited")])) == "awaited"


def test_threaded_actor_calls_complete(ray_backend):
    log = ray_backend.remote(max_concurrency=4)(Log).remote()
    ray_backend.get([log.add.remote(i) for i in range(8)])
    assert sorted(ray_backend.get(log.entries_so_far.remote())) == list(range(8))


def test_nested_tasks_and_actors(ray_backend):
    def outer():
        inner_log = ray_backend.remote(Log).remote()
        square = ray_backend.remote(lambda x: x * x)
        ray_backend.get(inner_log.add.remote(ray_backend.get(square.remote(3))))
        return ray_backend.get(inner_log.entries_so_far.remote())

    assert ray_backend.get(ray_backend.remote(outer).remote()) == [9]


def test_runtime_context(ray_backend):
    def ids():
        ctx = ray_backend.get_runtime_context()
        return ctx.get_job_id(), ctx.get_task_id()

    (job, task_a), (_, task_b) = ray_backend.get([ray_backend.remote(ids).remote() for _ in range(2)])
    assert job == ray_backend.get_runtime_context().get_job_id()
    assert isinstance(task_a, str) and task_a != task_b
    assert ray_backend.get_runtime_context().get_actor_id() is None

    class Who:
        def me(self):
            return ray_backend.get_runtime_context().get_actor_id()

    assert isinstance(ray_backend.get(ray_backend.remote(Who).remote().me.remote()), str)
