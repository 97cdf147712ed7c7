"""``util.multiprocessing.Pool``: the ``multiprocessing.Pool`` interface on actors.

Every expectation holds on real Ray 2.60's ``ray.util.multiprocessing``; the
same test runs on ``rayreact.util.multiprocessing``. Errors are re-raised as
the function's own exception (as ``multiprocessing`` does), timeouts are
``multiprocessing.TimeoutError``; where Ray departs from ``multiprocessing``
we follow Ray: ``imap`` yields a failed item as a ``PoolTaskError`` value and
``error_callback`` receives the ``PoolTaskError``.
"""

import multiprocessing
import os

import pytest

from conftest import backend_fixture, submodule

# On rayreact-replay: each scenario starts its own Pool (new actors), and a new actor ends a replay run
# (the reactor does not yet replay creation), so none is expected to replay.
ray_backend = backend_fixture(replay=True, must_replay=False)


def square(x):
    return x * x


def add(a, b):
    return a + b


def fail_on_three(x):
    if x == 3:
        raise ValueError(f"bad {x}")
    return x


def pid(_=None):
    return os.getpid()


_initialized_with = None


def remember(value):
    global _initialized_with
    _initialized_with = value


def initialized_with(_=None):
    return _initialized_with


def wait_then(backend_name, sig, value):
    """Return ``value`` once ``sig`` is sent (runs inside a pool actor)."""
    import importlib

    importlib.import_module(backend_name).get(sig.wait.remote())
    return value


@pytest.fixture
def mp(ray_backend):
    return submodule(ray_backend, "util.multiprocessing")


@pytest.fixture
def pool(mp):
    with mp.Pool(processes=2) as p:
        yield p


def test_map_starmap_apply(pool):
    assert pool.map(square, range(10)) == [x * x for x in range(10)]
    assert pool.map(square, range(7), chunksize=3) == [x * x for x in range(7)]
    assert pool.map(square, (x for x in range(4))) == [0, 1, 4, 9]
    assert pool.starmap(add, [(1, 2), (3, 4)]) == [3, 7]
    assert pool.apply(add, (1, 2)) == 3
    assert pool.apply(add, (1,), {"b": 5}) == 6


def test_async_results(pool):
    assert pool.apply_async(square, (4,)).get(timeout=60) == 16
    result = pool.map_async(square, range(5))
    result.wait()
    assert result.ready() and result.successful()
    assert result.get() == [0, 1, 4, 9, 16]
    assert pool.starmap_async(add, [(1, 1), (2, 2)]).get() == [2, 4]


def test_imap_keeps_order_and_imap_unordered_returns_everything(pool):
    assert list(pool.imap(square, range(8))) == [x * x for x in range(8)]
    assert list(pool.imap(square, range(8), chunksize=3)) == [x * x for x in range(8)]
    assert list(pool.imap(square, iter(range(5)))) == [0, 1, 4, 9, 16]
    assert sorted(pool.imap_unordered(square, range(8))) == [x * x for x in range(8)]
    assert sorted(pool.imap_unordered(square, iter(range(5)), chunksize=2)) == [0, 1, 4, 9, 16]


def test_imap_of_an_empty_input_is_empty(pool):
    assert list(pool.imap(square, [])) == []
    assert list(pool.imap_unordered(square, [])) == []
    assert pool.map(square, []) == []


def test_errors_are_reraised_as_the_original_exception(ray_backend, pool):
    with pytest.raises(ValueError, match="bad 3") as raised:
        pool.map(fail_on_three, range(5))
    assert not isinstance(raised.value, ray_backend.exceptions.RayError)
    with pytest.raises(ValueError):
        pool.apply(fail_on_three, (3,))
    result = pool.map_async(fail_on_three, range(5))
    result.wait()
    assert result.ready() and not result.successful()
    with pytest.raises(ValueError):
        result.get()


def test_imap_yields_failed_items_as_pool_task_errors(pool):
    results = list(pool.imap(fail_on_three, range(5)))
    assert results[:3] == [0, 1, 2] and results[4] == 4
    assert type(results[3]).__name__ == "PoolTaskError"
    assert isinstance(results[3].underlying, ValueError)


def test_callbacks(pool):
    import threading

    done = threading.Event()
    seen = {}

    def on_result(value):
        seen["result"] = value

    def on_error(error):
        seen["error"] = error
        done.set()

    result = pool.map_async(square, [1, 2, 3], callback=on_result)
    assert result.get(timeout=60) == [1, 4, 9]
    # The callback has run by the time the result is ready; Ray hands it the values in completion order.
    assert sorted(seen["result"]) == [1, 4, 9]
    single = pool.apply_async(square, (5,), callback=on_result)
    single.wait(60)
    assert seen["result"] == 25
    failing = pool.apply_async(fail_on_three, (3,), callback=on_result, error_callback=on_error)
    assert done.wait(60)
    # As in Ray, the error callback receives the PoolTaskError that carries the exception.
    assert isinstance(seen["error"].underlying, ValueError)
    failing.wait(60)
    assert not failing.successful()
    assert seen["result"] == 25  # the success callback was not called for the failure


def test_timeouts_raise_multiprocessing_timeout_error(ray_backend, pool, signal):
    result = pool.apply_async(wait_then, (ray_backend.__name__, signal, "done"))
    with pytest.raises(multiprocessing.TimeoutError):
        result.get(timeout=0.2)
    result.wait(0.1)
    assert not result.ready()
    with pytest.raises(ValueError):
        result.successful()
    signal.send.remote()
    assert result.get(timeout=60) == "done"
    assert result.ready() and result.successful()


def test_imap_next_times_out(ray_backend, pool, signal):
    import functools

    iterator = pool.imap(functools.partial(wait_then, ray_backend.__name__, signal), ["x"])
    with pytest.raises(multiprocessing.TimeoutError):
        iterator.next(timeout=0.2)
    signal.send.remote()
    assert iterator.next(timeout=60) == "x"
    with pytest.raises(StopIteration):
        iterator.next(timeout=60)


def test_initializer_runs_in_every_actor(mp):
    with mp.Pool(processes=2, initializer=remember, initargs=("ready",)) as p:
        assert p.map(initialized_with, range(8), chunksize=1) == ["ready"] * 8


def test_maxtasksperchild_replaces_the_actor(mp):
    with mp.Pool(processes=1, maxtasksperchild=1) as p:
        pids = [p.apply(pid) for _ in range(3)]
    assert len(set(pids)) == 3


def test_closed_pool_refuses_work(mp):
    p = mp.Pool(processes=1)
    with pytest.raises(ValueError):
        p.join()  # not closed yet
    assert p.apply(square, (3,)) == 9
    p.close()
    with pytest.raises(ValueError):
        p.apply(square, (3,))
    with pytest.raises(ValueError):
        p.map(square, [1])
    p.join()


def test_terminated_pool_refuses_work(mp):
    with mp.Pool(processes=1) as p:
        assert p.apply(square, (2,)) == 4
    with pytest.raises(ValueError):
        p.apply(square, (3,))
    with pytest.raises(ValueError):
        p.__enter__()


def test_pool_size_is_checked_against_the_session(mp):
    with pytest.raises(ValueError):
        mp.Pool(processes=3)  # the session has 2 CPUs
    with pytest.raises(ValueError):
        mp.Pool(processes=0)


def test_default_size_is_the_session_cpu_count(mp):
    with mp.Pool() as p:
        assert len(set(p.map(pid, range(16), chunksize=1))) == 2


def test_timeout_error_is_exported(mp):
    assert mp.TimeoutError is multiprocessing.TimeoutError
