"""Resource accounting: CPUs, GPUs (declared, none needed physically) and custom resources.

A request that cannot fit now waits, it does not fail; a request that can
never fit waits too (Ray warns) and can be cancelled.  GPU tasks see their
assignment in ``get_gpu_ids()`` and ``CUDA_VISIBLE_DEVICES``.
"""

import os

import pytest

from conftest import backend_fixture, wait_for_file, wait_until

ray_backend = backend_fixture(num_cpus=2, num_gpus=2, resources={"accel": 1.0})


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
        await asyncio.wait_for(self.all_here.wait(), 60)


def gpu_view(backend):
    return [int(i) for i in backend.get_gpu_ids()], os.environ.get("CUDA_VISIBLE_DEVICES")


def test_cluster_resources_include_declared_resources(ray_backend):
    total = ray_backend.cluster_resources()
    assert total["CPU"] == 2.0 and total["GPU"] == 2.0 and total["accel"] == 1.0
    assert ray_backend.nodes()[0]["Resources"]["GPU"] == 2.0


def test_driver_has_no_gpu_assignment(ray_backend):
    assert ray_backend.get_gpu_ids() == []


def test_gpu_task_sees_its_gpu(ray_backend):
    task = ray_backend.remote(num_gpus=1)(lambda: gpu_view(ray_backend))
    ids, visible = ray_backend.get(task.remote())
    assert len(ids) == 1 and ids[0] in (0, 1)
    assert visible == str(ids[0])


def test_concurrent_gpu_tasks_get_distinct_gpus(ray_backend):
    meeting = ray_backend.remote(Rendezvous).remote(2)

    def hold_gpu(m):
        # Both tasks are inside at the same time, so they hold both GPUs at once.
        ray_backend.get(m.arrive.remote())
        return gpu_view(ray_backend)

    task = ray_backend.remote(num_gpus=1)(hold_gpu)
    (ids_a, visible_a), (ids_b, visible_b) = ray_backend.get([task.remote(meeting), task.remote(meeting)], timeout=120)
    assert sorted(ids_a + ids_b) == [0, 1]
    assert {visible_a, visible_b} == {"0", "1"}


def test_two_gpu_task_sees_both(ray_backend):
    task = ray_backend.remote(num_gpus=2)(lambda: gpu_view(ray_backend))
    ids, visible = ray_backend.get(task.remote())
    assert sorted(ids) == [0, 1]
    assert sorted(visible.split(",")) == ["0", "1"]


def test_cpu_task_has_no_gpus(ray_backend):
    ids, visible = ray_backend.get(ray_backend.remote(lambda: gpu_view(ray_backend)).remote())
    assert ids == []
    assert visible in (None, "")


def test_gpu_actor_keeps_its_gpu(ray_backend):
    class Holder:
        def view(self):
            return gpu_view(ray_backend)

    actor = ray_backend.remote(num_gpus=1)(Holder).remote()
    first = ray_backend.get(actor.view.remote())
    assert len(first[0]) == 1 and first[1] == str(first[0][0])
    assert ray_backend.get(actor.view.remote()) == first
    ray_backend.kill(actor)


def test_gpu_request_beyond_free_gpus_waits(ray_backend, signal):
    def hold(sig):
        ray_backend.get(sig.wait.remote())
        return gpu_view(ray_backend)

    holder = ray_backend.remote(num_gpus=2)(hold).remote(signal)
    wait_until(lambda: ray_backend.available_resources().get("GPU", 0.0) == 0.0)
    waiting = ray_backend.remote(num_gpus=1)(lambda: gpu_view(ray_backend)).remote()
    ready, _ = ray_backend.wait([waiting], timeout=0.5)
    assert ready == []
    signal.send.remote()
    assert len(ray_backend.get(waiting, timeout=120)[0]) == 1
    assert sorted(ray_backend.get(holder, timeout=120)[0]) == [0, 1]


def test_cpu_request_beyond_free_cpus_waits(ray_backend, gate):
    def hold(path):
        wait_for_file(path)  # not get(): a task blocked in get returns its CPU
        return "held"

    holder = ray_backend.remote(num_cpus=2)(hold).remote(gate.path)
    wait_until(lambda: ray_backend.available_resources().get("CPU", 0.0) == 0.0)
    waiting = ray_backend.remote(num_cpus=1)(lambda: "ran").remote()
    ready, _ = ray_backend.wait([waiting], timeout=0.5)
    assert ready == []
    gate.open()
    assert ray_backend.get([holder, waiting], timeout=120) == ["held", "ran"]


def test_task_blocked_in_get_lends_its_cpu(ray_backend, signal):
    # Ray returns a blocked task's CPU, so a task that both CPUs' holders wait on can still run.
    def wait_on(sig):
        ray_backend.get(sig.wait.remote())
        return "released"

    holders = [ray_backend.remote(num_cpus=1)(wait_on).remote(signal) for _ in range(2)]
    runs = ray_backend.remote(num_cpus=1)(lambda: "ran").remote()
    assert ray_backend.get(runs, timeout=120) == "ran"
    signal.send.remote()
    assert ray_backend.get(holders, timeout=120) == ["released", "released"]


def test_more_tasks_than_cpus_all_finish(ray_backend):
    square = ray_backend.remote(num_cpus=1)(lambda x: x * x)
    assert ray_backend.get([square.remote(i) for i in range(20)], timeout=120) == [i * i for i in range(20)]


def test_infeasible_request_waits_instead_of_failing(ray_backend):
    ref = ray_backend.remote(num_cpus=3)(lambda: "never").remote()
    ready, not_ready = ray_backend.wait([ref], timeout=1.0)
    assert ready == [] and not_ready == [ref]
    ray_backend.cancel(ref)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(ref, timeout=60)


def test_unknown_custom_resource_waits_instead_of_failing(ray_backend):
    ref = ray_backend.remote(resources={"no_such_resource": 1})(lambda: "never").remote()
    ready, _ = ray_backend.wait([ref], timeout=1.0)
    assert ready == []
    ray_backend.cancel(ref)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(ref, timeout=60)


def test_custom_resource_is_exclusive(ray_backend, signal):
    def hold(sig):
        ray_backend.get(sig.wait.remote())
        return "first"

    first = ray_backend.remote(resources={"accel": 1})(hold).remote(signal)
    wait_until(lambda: ray_backend.available_resources().get("accel", 0.0) == 0.0)
    second = ray_backend.remote(resources={"accel": 1})(lambda: "second").remote()
    ready, _ = ray_backend.wait([second], timeout=0.5)
    assert ready == []
    signal.send.remote()
    assert ray_backend.get([first, second], timeout=120) == ["first", "second"]
    wait_until(lambda: ray_backend.available_resources().get("accel") == 1.0)


def test_fractional_custom_resource_shares(ray_backend):
    meeting = ray_backend.remote(Rendezvous).remote(2)

    def meet(m):
        ray_backend.get(m.arrive.remote())
        return "met"

    task = ray_backend.remote(resources={"accel": 0.5})(meet)
    assert ray_backend.get([task.remote(meeting), task.remote(meeting)], timeout=120) == ["met", "met"]


def test_actor_holds_its_resources_for_its_lifetime(ray_backend):
    class Owner:
        def ping(self):
            return "pong"

    owner = ray_backend.remote(resources={"accel": 1})(Owner).remote()
    assert ray_backend.get(owner.ping.remote()) == "pong"
    waiting = ray_backend.remote(resources={"accel": 1})(lambda: "got it").remote()
    ready, _ = ray_backend.wait([waiting], timeout=0.5)
    assert ready == []
    ray_backend.kill(owner)
    assert ray_backend.get(waiting, timeout=120) == "got it"


def test_default_actors_do_not_hold_cpus(ray_backend):
    class Idle:
        def ping(self):
            return "pong"

    actors = [ray_backend.remote(Idle).remote() for _ in range(4)]
    assert ray_backend.get([a.ping.remote() for a in actors], timeout=120) == ["pong"] * 4
    assert ray_backend.get(ray_backend.remote(num_cpus=2)(lambda: "ran").remote(), timeout=120) == "ran"
    for a in actors:
        ray_backend.kill(a)
