"""``util.queue.Queue``: FIFO order, bounds, blocking with timeouts, batches, sharing, shutdown.

Every expectation holds on real Ray 2.60's ``ray.util.queue``; the same test
runs on ``rayreact.util.queue``. Errors: the non-blocking calls raise
``Full``/``Empty`` themselves; a timed-out blocking call or a batch that does
not fit raises the actor's error, an instance of both ``RayTaskError`` and
``Full``/``Empty``.
"""

import asyncio

import pytest

from conftest import backend_fixture, submodule, wait_until_calls_fail

# On rayreact-replay: each scenario makes its own Queue (an async actor: a new reactor every repetition), and
# its loops of puts and gets are too short to replay within one; none is expected to replay here
# (test_reactor.py's queue loop does).
ray_backend = backend_fixture(replay=True, must_replay=False)


@pytest.fixture
def qmod(ray_backend):
    return submodule(ray_backend, "util.queue")


def test_items_come_out_in_fifo_order(qmod):
    q = qmod.Queue()
    for i in range(5):
        q.put(i)
    assert [q.get() for _ in range(5)] == [0, 1, 2, 3, 4]


def test_size_empty_and_full(qmod):
    q = qmod.Queue(maxsize=2)
    assert q.empty() and not q.full() and q.size() == 0 and len(q) == 0
    q.put("a")
    q.put("b")
    assert q.full() and not q.empty() and q.qsize() == 2 and len(q) == 2
    assert q.maxsize == 2


def test_unbounded_queue_is_never_full(qmod):
    q = qmod.Queue()
    q.put_nowait_batch(range(100))
    assert not q.full() and q.size() == 100


def test_nowait_calls_raise_full_and_empty(qmod):
    q = qmod.Queue(maxsize=1)
    with pytest.raises(qmod.Empty):
        q.get_nowait()
    with pytest.raises(qmod.Empty):
        q.get(block=False)
    q.put_nowait(1)
    with pytest.raises(qmod.Full):
        q.put_nowait(2)
    with pytest.raises(qmod.Full):
        q.put(2, block=False)
    assert q.get_nowait() == 1


def test_full_and_empty_are_the_queue_module_errors(qmod):
    import queue

    assert issubclass(qmod.Full, queue.Full) and issubclass(qmod.Empty, queue.Empty)


def test_blocking_calls_time_out_with_full_and_empty(ray_backend, qmod):
    q = qmod.Queue(maxsize=1)
    with pytest.raises(qmod.Empty) as empty:
        q.get(timeout=0.1)
    assert isinstance(empty.value, ray_backend.exceptions.RayTaskError)
    q.put(1)
    with pytest.raises(qmod.Full):
        q.put(2, timeout=0.1)
    assert q.get() == 1 and q.empty()


def test_negative_timeout_is_rejected(qmod):
    q = qmod.Queue()
    with pytest.raises(ValueError):
        q.put(1, timeout=-1)
    with pytest.raises(ValueError):
        q.get(timeout=-1)


def test_get_waits_for_a_producer(ray_backend, qmod):
    q = qmod.Queue()

    @ray_backend.remote
    def produce(queue, items):
        for item in items:
            queue.put(item)

    produce.remote(q, ["x", "y"])
    assert [q.get(timeout=60), q.get(timeout=60)] == ["x", "y"]


def test_put_on_a_full_queue_waits_for_a_consumer(ray_backend, qmod):
    q = qmod.Queue(maxsize=1)
    q.put(1)

    @ray_backend.remote
    def put_more(queue):
        queue.put(2)  # blocks until the driver takes item 1
        return "put"

    done = put_more.remote(q)
    ready, _ = ray_backend.wait([done], timeout=0.3)
    assert ready == []
    assert q.get() == 1
    assert ray_backend.get(done, timeout=60) == "put"
    assert q.get() == 2


def test_queue_is_shared_by_tasks_and_actors(ray_backend, qmod):
    q = qmod.Queue()

    @ray_backend.remote
    class Consumer:
        def __init__(self, queue):
            self.queue = queue

        def take(self, n):
            return [self.queue.get(timeout=60) for _ in range(n)]

    @ray_backend.remote
    def produce(queue, start):
        for i in range(start, start + 3):
            queue.put(i)

    consumer = Consumer.remote(q)
    ray_backend.get([produce.remote(q, 0), produce.remote(q, 10)])
    assert sorted(ray_backend.get(consumer.take.remote(6))) == [0, 1, 2, 10, 11, 12]
    assert q.empty()


def test_batches_are_all_or_nothing(ray_backend, qmod):
    q = qmod.Queue(maxsize=3)
    q.put_nowait_batch([1, 2])
    with pytest.raises(qmod.Full):
        q.put_nowait_batch([3, 4])
    assert q.size() == 2
    with pytest.raises(qmod.Empty):
        q.get_nowait_batch(3)
    assert q.size() == 2
    assert q.get_nowait_batch(2) == [1, 2]
    assert q.get_nowait_batch(0) == []


def test_batch_arguments_are_checked(qmod):
    q = qmod.Queue()
    with pytest.raises(TypeError):
        q.put_nowait_batch(5)
    with pytest.raises(TypeError):
        q.get_nowait_batch("2")
    with pytest.raises(ValueError):
        q.get_nowait_batch(-1)


def test_async_put_and_get(qmod):
    q = qmod.Queue(maxsize=1)

    async def roundtrip():
        await q.put_async("a")
        with pytest.raises(qmod.Full):
            await q.put_async("b", block=False)
        item = await q.get_async()
        with pytest.raises(qmod.Empty):
            await q.get_async(block=False)
        with pytest.raises(qmod.Empty):
            await q.get_async(timeout=0.1)
        with pytest.raises(ValueError):
            await q.get_async(timeout=-1)
        return item

    assert asyncio.run(roundtrip()) == "a"


def test_actor_options_reach_the_queue_actor(ray_backend, qmod):
    q = qmod.Queue(actor_options={"name": "util-queue-test"})
    q.put(7)
    assert ray_backend.get(ray_backend.get_actor("util-queue-test").qsize.remote()) == 1
    q.shutdown()


@pytest.mark.parametrize("force", [False, True])
def test_shutdown_stops_the_actor(ray_backend, qmod, force):
    q = qmod.Queue()
    q.put(1)
    actor = q.actor
    q.shutdown(force=force)
    assert q.actor is None
    wait_until_calls_fail(ray_backend, actor.qsize.remote)
