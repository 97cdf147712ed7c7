"""``util.ActorPool``: ordering, idle-actor bookkeeping, timeouts and dead actors.

Every expectation here holds on real Ray 2.60's ``ray.util.ActorPool``; the same
test runs on ``rayreact.util.ActorPool``. Calls that must still be running are
held by a ``Signal`` actor, never by sleeping.
"""

import os

import pytest
from conftest import backend_fixture

ray_backend = backend_fixture(replay=True)


class Worker:
    def double(self, v):
        return 2 * v

    def pid(self, _=None):
        return os.getpid()


def make_pool(ray, n):
    cls = ray.remote(Worker)
    actors = [cls.remote() for _ in range(n)]
    return ray.util.ActorPool(actors), actors


def blocking(ray):
    """fn(actor, (sig, value)) -> a call that finishes only once ``sig`` is sent."""

    @ray.remote
    def wait_for(sig, value):
        ray.get(sig.wait.remote())
        return value

    return lambda actor, arg: actor.double.remote(wait_for.remote(*arg))


def test_map_returns_results_in_submission_order(ray_backend):
    pool, _ = make_pool(ray_backend, 2)
    assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4, 5])) == [2, 4, 6, 8, 10]


def test_map_unordered_returns_every_result(ray_backend):
    pool, _ = make_pool(ray_backend, 2)
    assert sorted(pool.map_unordered(lambda a, v: a.double.remote(v), range(6))) == [0, 2, 4, 6, 8, 10]


def test_map_is_lazy_until_iterated_but_submits_at_once(ray_backend):
    pool, _ = make_pool(ray_backend, 2)
    results = pool.map(lambda a, v: a.double.remote(v), [1, 2, 3])
    assert pool.has_next()
    assert list(results) == [2, 4, 6]
    assert not pool.has_next()


def test_more_values_than_actors_wait_in_fifo_order(ray_backend):
    pool, _ = make_pool(ray_backend, 1)
    for v in [1, 2, 3]:
        pool.submit(lambda a, v: a.double.remote(v), v)
    assert not pool.has_free()
    assert [pool.get_next(), pool.get_next(), pool.get_next()] == [2, 4, 6]
    assert pool.has_free()


def test_submit_uses_the_most_recently_added_idle_actor(ray_backend):
    pool, actors = make_pool(ray_backend, 2)
    pids = ray_backend.get([a.pid.remote() for a in actors])
    pool.submit(lambda a, _: a.pid.remote(), None)
    assert pool.get_next() == pids[-1]


def test_get_next_keeps_order_when_a_later_call_finishes_first(ray_backend, signal):
    pool, _ = make_pool(ray_backend, 2)
    pool.submit(blocking(ray_backend), (signal, 1))
    pool.submit(lambda a, v: a.double.remote(v), 2)
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.2)
    signal.send.remote()
    assert [pool.get_next(), pool.get_next()] == [2, 4]


def test_get_next_unordered_returns_the_finished_call_first(ray_backend, signal):
    pool, _ = make_pool(ray_backend, 2)
    pool.submit(blocking(ray_backend), (signal, 1))
    pool.submit(lambda a, v: a.double.remote(v), 2)
    assert pool.get_next_unordered(timeout=60) == 4
    with pytest.raises(TimeoutError):
        pool.get_next_unordered(timeout=0.2)
    signal.send.remote()
    assert pool.get_next_unordered() == 2
    assert not pool.has_next()


def test_get_next_after_get_next_unordered_is_refused(ray_backend, signal):
    pool, _ = make_pool(ray_backend, 2)
    pool.submit(blocking(ray_backend), (signal, 1))
    pool.submit(lambda a, v: a.double.remote(v), 2)
    assert pool.get_next_unordered(timeout=60) == 4
    with pytest.raises(ValueError):
        pool.get_next()
    signal.send.remote()
    assert pool.get_next_unordered() == 2


def test_timed_out_call_stays_pending_unless_ignored(ray_backend, signal):
    pool, _ = make_pool(ray_backend, 1)
    pool.submit(blocking(ray_backend), (signal, 1))
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.1)
    assert pool.has_next() and not pool.has_free()
    with pytest.raises(TimeoutError, match="ignored"):
        pool.get_next(timeout=0.1, ignore_if_timedout=True)
    # The ignored call is dropped and its actor is idle again.
    assert not pool.has_next() and pool.has_free()
    signal.send.remote()


def test_get_next_on_an_empty_pool_raises_stop_iteration(ray_backend):
    pool, _ = make_pool(ray_backend, 1)
    with pytest.raises(StopIteration):
        pool.get_next()
    with pytest.raises(StopIteration):
        pool.get_next_unordered()


def test_actor_is_busy_until_its_result_is_taken(ray_backend):
    pool, actors = make_pool(ray_backend, 1)
    pool.submit(lambda a, v: a.double.remote(v), 1)
    ray_backend.get(actors[0].double.remote(0))  # the call above has certainly finished
    assert not pool.has_free()
    assert pool.pop_idle() is None
    assert pool.get_next() == 2
    assert pool.has_free()
    assert pool.pop_idle() == actors[0]
    assert not pool.has_free()


def test_push_adds_an_actor_and_refuses_a_member(ray_backend):
    pool, actors = make_pool(ray_backend, 1)
    with pytest.raises(ValueError):
        pool.push(actors[0])
    pool.submit(lambda a, v: a.double.remote(v), 1)
    with pytest.raises(ValueError):
        pool.push(actors[0])  # busy members count too
    pool.submit(lambda a, v: a.double.remote(v), 2)  # waits: the only actor is busy
    extra = ray_backend.remote(Worker).remote()
    pool.push(extra)  # takes the waiting call at once
    assert not pool.has_free()
    assert sorted([pool.get_next_unordered(), pool.get_next_unordered()]) == [2, 4]


def test_map_discards_results_still_pending(ray_backend):
    pool, _ = make_pool(ray_backend, 2)
    pool.submit(lambda a, v: a.double.remote(v), 100)
    assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2])) == [2, 4]


def test_fn_may_return_a_list_of_refs(ray_backend):
    pool, _ = make_pool(ray_backend, 1)
    pool.submit(lambda a, v: [a.double.remote(v), a.double.remote(v + 1)], 1)
    assert pool.get_next() == [2, 4]


def test_actor_that_died_leaves_the_pool(ray_backend):
    @ray_backend.remote(max_restarts=0)
    class Fragile:
        def run(self, die):
            if die:
                os._exit(1)
            return "ok"

    a, b = Fragile.remote(), Fragile.remote()
    pool = ray_backend.util.ActorPool([a, b])
    pool.submit(lambda actor, die: actor.run.remote(die), True)  # goes to b
    with pytest.raises(ray_backend.exceptions.RayActorError):
        pool.get_next()
    assert pool.pop_idle() == a
    assert pool.pop_idle() is None


def test_application_error_keeps_the_actor(ray_backend):
    @ray_backend.remote
    class Picky:
        def run(self, v):
            if v < 0:
                raise ValueError("negative")
            return v

    pool = ray_backend.util.ActorPool([Picky.remote()])
    pool.submit(lambda a, v: a.run.remote(v), -1)
    with pytest.raises(ValueError):
        pool.get_next()
    assert pool.has_free()
    assert list(pool.map(lambda a, v: a.run.remote(v), [1, 2])) == [1, 2]
