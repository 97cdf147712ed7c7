"""One call executor: a failing call says the same thing in a worker, in replay, in local mode and in real Ray.

Each test runs on four backends: rayreact (reactor on: a repeated loop is replayed),
``rayreact-off`` (``_reactor=False``), ``rayreact-local`` (``local_mode=True``) and real Ray.
The messages asserted are Ray 2.60's own wording.
"""

import threading

import pytest

from conftest import named_backend_fixture

BACKENDS = ["rayreact", "rayreact-off", "rayreact-local", "ray"]


rb = named_backend_fixture(BACKENDS)


@pytest.fixture
def ray(rb):
    return rb[1]


def three_items():
    return 1, 2, 3


def one_item_list():
    return [1]


def a_scalar():
    return 5


def yields_one():
    yield 1


def pair_as_dict():
    return {"a": 1, "b": 2}


class NotPortable(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


def raise_not_portable():
    raise NotPortable("cannot travel")


def raise_value_error():
    raise ValueError("user failure")


class Returns:
    @staticmethod
    def _method(fn):
        def method(self):
            return fn()
        method.__name__ = fn.__name__
        return method

    three_items = _method(three_items)
    one_item_list = _method(one_item_list)
    a_scalar = _method(a_scalar)
    pair_as_dict = _method(pair_as_dict)
    raise_not_portable = _method(raise_not_portable)

    def yields_one(self):
        yield 1


class AsyncReturns:
    async def three_items(self):
        return 1, 2, 3


MISMATCHES = [
    (three_items, ValueError, "Task returned 3 objects, but num_returns=2."),
    (one_item_list, ValueError, "Task returned 1 objects, but num_returns=2."),
    (a_scalar, TypeError, "object of type 'int' has no len()"),
]


def _error_of(ray, ref, cls):
    with pytest.raises(cls) as info:
        ray.get(ref, timeout=60)
    assert isinstance(info.value, ray.exceptions.RayTaskError)
    return info.value


@pytest.mark.parametrize("fn, cls, message", MISMATCHES, ids=lambda v: getattr(v, "__name__", None))
def test_task_num_returns_mismatch_says_what_ray_says(ray, fn, cls, message):
    refs = ray.remote(num_returns=2)(fn).remote()
    for ref in refs:
        err = _error_of(ray, ref, cls)
        assert str(err.cause) == message
        assert message in str(err)


@pytest.mark.parametrize("fn, cls, message", MISMATCHES, ids=lambda v: getattr(v, "__name__", None))
def test_actor_num_returns_mismatch_says_what_ray_says(ray, fn, cls, message):
    actor = ray.remote(Returns).remote()
    refs = getattr(actor, fn.__name__).options(num_returns=2).remote()
    for ref in refs:
        assert str(_error_of(ray, ref, cls).cause) == message
    assert ray.get(actor.pair_as_dict.remote()) == {"a": 1, "b": 2}     # the actor lives on


def test_async_actor_num_returns_mismatch_says_what_ray_says(ray):
    actor = ray.remote(AsyncReturns).remote()
    refs = actor.three_items.options(num_returns=2).remote()
    for ref in refs:
        assert str(_error_of(ray, ref, ValueError).cause) == "Task returned 3 objects, but num_returns=2."


def test_a_sized_value_spreads_over_num_returns_as_in_ray(ray):
    # Ray takes any value with a length: a dict gives its keys.
    assert ray.get(list(ray.remote(num_returns=2)(pair_as_dict).remote())) == ["a", "b"]


@pytest.mark.parametrize("on", ["task", "actor"])
def test_a_short_generator_fails_the_refs_it_did_not_reach(ray, on):
    if on == "task":
        first, second = ray.remote(num_returns=2)(yields_one).remote()
    else:
        first, second = ray.remote(Returns).remote().yields_one.options(num_returns=2).remote()
    assert ray.get(first) == 1
    assert str(_error_of(ray, second, ValueError).cause) == "Task returned 1 objects, but num_returns=2."


def test_the_same_message_from_a_replayed_reaction(rb):
    """rayreact's reactor replays the repeated loop; the reaction that raises makes the error the caller gets
    (and the reactor falls back): the message is the dynamic runtime's."""
    name, ray = rb
    if name == "rayreact":
        from rayreact.core import context
        context.current.reactor.reset()
    actor = ray.remote(Returns).remote()
    for _ in range(30):
        refs = actor.three_items.options(num_returns=2).remote()
        assert ray.get(actor.pair_as_dict.remote()) == {"a": 1, "b": 2}
        assert str(_error_of(ray, refs[1], ValueError).cause) == "Task returned 3 objects, but num_returns=2."
    if name == "rayreact":
        reasons = [reason for _, reason, _ in context.current.reactor.snapshot()["fallbacks"]]
        assert any(r.startswith("a reaction raised (Returns.three_items") for r in reasons), reasons


@pytest.mark.parametrize("on", ["task", "actor"])
def test_an_exception_that_cannot_be_pickled_still_reaches_the_caller(ray, on):
    if on == "task":
        ref = ray.remote(raise_not_portable).remote()
    else:
        ref = ray.remote(Returns).remote().raise_not_portable.remote()
    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(ref, timeout=60)
    assert not isinstance(info.value, NotPortable)
    assert isinstance(info.value.cause, ray.exceptions.RayError)
    assert "isn't serializable" in str(info.value.cause)
    assert "cannot travel" in str(info.value) and "raise_not_portable" in str(info.value)


def test_remote_traceback_shows_user_code_only(ray):
    with pytest.raises(ValueError) as info:
        ray.get(ray.remote(raise_value_error).remote(), timeout=60)
    text = str(info.value)
    assert "raise_value_error" in text and "user failure" in text
    for ours in ("core/executor.py", "core/worker.py", "core/local_mode.py", "core/reactor.pyx", "_raylet.pyx"):
        assert ours not in text


def test_an_unpicklable_result_is_an_error_at_get(ray):
    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(ray.remote(lambda: threading.Lock()).remote(), timeout=60)
    assert "lock" in str(info.value).lower()
