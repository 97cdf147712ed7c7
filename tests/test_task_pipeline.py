"""Short tasks sent behind a busy worker's task (rayreact's pipelining) keep Ray's semantics.

A fan-out of short tasks lets rayreact send a task to a pool worker before the one it runs has ended.
What must not change: a task blocked in ``get``/``wait`` on a child never holds that child back, and
``cancel`` stops exactly the task it names, whether that task runs or waits behind another.  Each test
warms the function first (only tasks known to be short are sent behind others) and runs on both backends.
"""

import importlib

import pytest

from conftest import wait_for_file


def quick(x, backend=None, how="get"):
    if backend is None:
        return x
    ray = importlib.import_module(backend)
    child = ray.remote(quick).remote(x + 1)      # a short task too: it may be sent behind this one
    if how == "wait":
        ray.wait([child])
    return ray.get(child)


def held(x, path=None):
    if path is not None:
        wait_for_file(path)                      # keeps its CPU, as a task computing would
    return x


@pytest.mark.parametrize("how", ["get", "wait"])
def test_a_task_blocked_on_its_child_never_holds_the_child_back(ray_backend, how):
    task = ray_backend.remote(quick)
    assert ray_backend.get([task.remote(i) for i in range(40)]) == list(range(40))
    name = ray_backend.__name__
    refs = [task.remote(i, name if i % 5 == 0 else None, how) for i in range(300)]
    assert ray_backend.get(refs, timeout=120) == [i + 1 if i % 5 == 0 else i for i in range(300)]


def test_cancel_of_a_task_waiting_behind_a_running_one(ray_backend, gate):
    task = ray_backend.remote(held)
    assert ray_backend.get([task.remote(i) for i in range(20)]) == list(range(20))
    running = [task.remote(1, gate.path), task.remote(2, gate.path)]      # both CPUs
    waiting = task.remote(3)
    ray_backend.cancel(waiting)
    gate.open()
    assert ray_backend.get(running, timeout=60) == [1, 2]
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(waiting, timeout=60)


def test_cancel_of_a_running_task_spares_the_task_behind_it(ray_backend, gate):
    task = ray_backend.remote(held)
    assert ray_backend.get([task.remote(i) for i in range(20)]) == list(range(20))
    first, second = task.remote(1, gate.path), task.remote(2, gate.path)
    behind = [task.remote(i) for i in range(3, 9)]
    ray_backend.cancel(first)
    with pytest.raises(ray_backend.exceptions.TaskCancelledError):
        ray_backend.get(first, timeout=60)
    gate.open()
    assert ray_backend.get(second, timeout=60) == 2
    assert ray_backend.get(behind, timeout=60) == list(range(3, 9))
