"""Actors: processes, handles, ordering, concurrency, class features, named actors.

Concurrency is proved with rendezvous patterns (two calls that can only finish
if they run at the same time), never with timing.
"""

import asyncio
import os
import threading

import pytest
from conftest import backend_fixture, colocated, wait_until, wait_until_calls_fail

ray_backend = backend_fixture(replay=True, colocate=True)


class Counter:
    def __init__(self, start=0):
        self.n = start

    def incr(self, by=1):
        self.n += by
        return self.n

    def value(self):
        return self.n

    def pid(self):
        return os.getpid()


class Log:
    """Records the order in which calls arrive."""

    def __init__(self):
        self.entries = []

    def add(self, x):
        self.entries.append(x)
        return x

    def entries_so_far(self):
        return list(self.entries)


class Base:
    kind = "base"

    def __init__(self, x):
        self.x = x

    def who(self):
        return "base"

    def describe(self):
        return f"{self.who()}:{self.kind}:{self.x}"

    def base_only(self):
        return self.x * 10


class Derived(Base):
    kind = "derived"

    def __init__(self, x, y):
        super().__init__(x)
        self.y = y

    def who(self):
        return "derived"

    def both(self):
        return self.x + self.y


class WithClassFeatures:
    shared = 5
    registry = ["a", "b"]

    def __init__(self):
        self.own = WithClassFeatures.shared + 1

    @staticmethod
    def double(v):
        return 2 * v

    @classmethod
    def cls_name(cls):
        return cls.__name__

    def use_all(self):
        return self.shared, self.own, self.double(self.own), self.cls_name(), len(self.registry)

    def bump_shared(self):
        WithClassFeatures.shared += 100
        return WithClassFeatures.shared


class FailingInit:
    def __init__(self, message):
        raise ValueError(message)

    def method(self):
        return "unreachable"


class ThreadedMeeting:
    """Sync actor: ``meet`` returns only after ``parties`` calls are inside it at once."""

    def __init__(self, parties):
        self.barrier = threading.Barrier(parties, timeout=60)

    def meet(self, i):
        self.barrier.wait()
        return i


class AsyncMeeting:
    def __init__(self):
        self.opened = asyncio.Event()
        self.done = []

    async def wait_open(self, i):
        await asyncio.wait_for(self.opened.wait(), 60)
        self.done.append(i)
        return i

    async def open(self):
        self.opened.set()
        return "opened"

    async def resolve(self, box):
        # ``await ref`` inside an async actor method
        return await box[0]

    async def completed(self):
        return sorted(self.done)


# --- processes and handles ---------------------------------------------------------------------


def test_actor_state_persists_across_calls(ray_backend):
    counter = ray_backend.remote(Counter).remote(10)
    assert ray_backend.get([counter.incr.remote() for _ in range(3)]) == [11, 12, 13]
    assert ray_backend.get(counter.incr.remote(by=5)) == 18


def test_calls_from_a_loop_see_each_earlier_call(ray_backend):
    # (a loop of calls to one actor: the scenario the reactor replays within one repetition)
    counter = ray_backend.remote(Counter).remote(0)
    assert [ray_backend.get(counter.incr.remote(by=2)) for _ in range(40)] == list(range(2, 82, 2))
    assert ray_backend.get(counter.value.remote()) == 80


def test_each_actor_is_its_own_process(ray_backend):
    actors = [ray_backend.remote(Counter).remote() for _ in range(3)]
    pids = ray_backend.get([a.pid.remote() for a in actors])
    # (co-located: a host process per CPU, here 2, is what the user asked for)
    assert len(set(pids)) == (2 if colocated(ray_backend) else 3)
    assert os.getpid() not in pids
    # An actor's process is stable across calls.
    assert ray_backend.get(actors[0].pid.remote()) == pids[0]
    for a in actors:
        ray_backend.kill(a)


def test_actors_are_independent(ray_backend):
    a, b = ray_backend.remote(Counter).remote(), ray_backend.remote(Counter).remote(100)
    ray_backend.get(a.incr.remote())
    assert ray_backend.get([a.value.remote(), b.value.remote()]) == [1, 100]


def test_actor_options(ray_backend):
    counter = ray_backend.remote(Counter).options(num_cpus=0, max_restarts=0).remote(3)
    assert ray_backend.get(counter.value.remote()) == 3
    decorated = ray_backend.remote(num_cpus=0)(Counter)
    assert ray_backend.get(decorated.remote(4).value.remote()) == 4


def test_actor_class_rejects_unknown_option(ray_backend):
    with pytest.raises(ValueError):
        ray_backend.remote(Counter).options(not_an_option=True)


def test_actor_class_cannot_be_instantiated_directly(ray_backend):
    with pytest.raises(TypeError):
        ray_backend.remote(Counter)()


def test_dir_of_handle_and_class_lists_the_methods(ray_backend):
    actor_class = ray_backend.remote(Counter)
    handle = actor_class.remote(1)
    names = dir(handle)
    for expected in ("incr", "value", "pid", "__ray_ready__", "__ray_call__", "__ray_terminate__"):
        assert expected in names
    assert {"incr", "value", "pid", "remote", "options"} <= set(dir(actor_class))
    assert ray_backend.get(handle.value.remote()) == 1


def test_ray_call_runs_a_function_on_the_actor_instance(ray_backend):
    handle = ray_backend.remote(Counter).remote(7)
    assert ray_backend.get(handle.__ray_call__.remote(lambda self, by: self.incr(by), 3)) == 10
    assert ray_backend.get(handle.value.remote()) == 10


def test_handle_passed_to_task(ray_backend):
    counter = ray_backend.remote(Counter).remote()

    def bump(c, times):
        return ray_backend.get([c.incr.remote() for _ in range(times)])[-1]

    assert ray_backend.get(ray_backend.remote(bump).remote(counter, 3)) == 3
    assert ray_backend.get(counter.value.remote()) == 3


def test_handle_passed_to_another_actor(ray_backend):
    counter = ray_backend.remote(Counter).remote()

    class Caller:
        def __init__(self, target):
            self.target = target

        def call(self, by):
            return ray_backend.get(self.target.incr.remote(by))

    caller = ray_backend.remote(Caller).remote(counter)
    assert ray_backend.get(caller.call.remote(2)) == 2
    assert ray_backend.get(counter.incr.remote()) == 3


def test_handle_nested_in_container_and_returned(ray_backend):
    counter = ray_backend.remote(Counter).remote()

    def use(box):
        return ray_backend.get(box["c"].incr.remote())

    assert ray_backend.get(ray_backend.remote(use).remote({"c": counter})) == 1

    def make():
        return ray_backend.remote(Counter).remote(50)

    made = ray_backend.get(ray_backend.remote(make).remote())
    assert ray_backend.get(made.incr.remote()) == 51


def test_task_creates_and_uses_an_actor(ray_backend):
    def work():
        log = ray_backend.remote(Log).remote()
        ray_backend.get([log.add.remote(i) for i in range(3)])
        return ray_backend.get(log.entries_so_far.remote())

    assert ray_backend.get(ray_backend.remote(work).remote()) == [0, 1, 2]


def test_actor_creates_actors_and_tasks(ray_backend):
    class Parent:
        def __init__(self):
            self.child = ray_backend.remote(Counter).remote(1)

        def run(self):
            square = ray_backend.remote(lambda x: x * x)
            return ray_backend.get(square.remote(ray_backend.get(self.child.incr.remote())))

    parent = ray_backend.remote(Parent).remote()
    assert ray_backend.get(parent.run.remote()) == 4


def test_actor_method_num_returns(ray_backend):
    class Splitter:
        @ray_backend.method(num_returns=2)
        def split(self, pair):
            return pair[0], pair[1]

        def whole(self, pair):
            return pair

    s = ray_backend.remote(Splitter).remote()
    left, right = s.split.remote(("l", "r"))
    assert ray_backend.get([right, left]) == ["r", "l"]
    assert ray_backend.get(s.whole.remote(("l", "r"))) == ("l", "r")


def test_actor_method_options_num_returns(ray_backend):
    class Pair:
        def two(self):
            return 1, 2

    p = ray_backend.remote(Pair).remote()
    refs = p.two.options(num_returns=2).remote()
    assert ray_backend.get(refs) == [1, 2]
    assert ray_backend.get(p.two.remote()) == (1, 2)


def test_runtime_context_in_actor(ray_backend):
    class Who:
        def ids(self):
            ctx = ray_backend.get_runtime_context()
            return ctx.get_actor_id(), ctx.get_task_id(), ctx.get_job_id()

        def me(self):
            return ray_backend.get_runtime_context().current_actor

        def incr_then_value(self):
            self.n = getattr(self, "n", 0) + 1
            return self.n

    a, b = ray_backend.remote(Who).remote(), ray_backend.remote(Who).remote()
    (actor1, task1, job1), (actor1b, task1b, _), (actor2, _, _) = ray_backend.get(
        [a.ids.remote(), a.ids.remote(), b.ids.remote()])
    assert isinstance(actor1, str) and actor1 == actor1b and actor1 != actor2
    assert task1 != task1b
    assert job1 == ray_backend.get_runtime_context().get_job_id()
    # current_actor is a handle to the same actor (same state).
    me = ray_backend.get(a.me.remote())
    ray_backend.get(a.incr_then_value.remote())
    assert ray_backend.get(me.incr_then_value.remote()) == 2


# --- errors on handles --------------------------------------------------------------------------


def test_unknown_method_is_attribute_error(ray_backend):
    counter = ray_backend.remote(Counter).remote()
    with pytest.raises(AttributeError):
        counter.no_such_method.remote()
    assert ray_backend.get(counter.value.remote()) == 0


def test_method_wrong_arity_is_type_error_at_submission(ray_backend):
    counter = ray_backend.remote(Counter).remote()
    with pytest.raises(TypeError):
        counter.value.remote(1)
    with pytest.raises(TypeError):
        counter.incr.remote(1, 2)
    with pytest.raises(TypeError):
        counter.incr.remote(step=1)
    assert ray_backend.get(counter.value.remote()) == 0


def test_constructor_wrong_arity_is_type_error_at_submission(ray_backend):
    with pytest.raises(TypeError):
        ray_backend.remote(Counter).remote(1, 2)
    with pytest.raises(TypeError):
        ray_backend.remote(Derived).remote(1)


def test_method_called_directly_is_an_error(ray_backend):
    counter = ray_backend.remote(Counter).remote()
    with pytest.raises(TypeError):
        counter.value()


def test_constructor_error_surfaces_on_first_method_result(ray_backend):
    actor = ray_backend.remote(FailingInit).remote("bad constructor argument")
    with pytest.raises(ray_backend.exceptions.RayActorError) as info:
        ray_backend.get(actor.method.remote(), timeout=60)
    assert "bad constructor argument" in str(info.value)
    assert "ValueError" in str(info.value)
    with pytest.raises(ray_backend.exceptions.RayActorError):
        ray_backend.get(actor.method.remote(), timeout=60)


# --- ordering -------------------------------------------------------------------------------------


def test_calls_from_one_caller_run_in_submission_order(ray_backend):
    log = ray_backend.remote(Log).remote()
    ray_backend.get([log.add.remote(i) for i in range(50)])
    assert ray_backend.get(log.entries_so_far.remote()) == list(range(50))


def test_order_kept_when_later_call_arguments_are_ready_first(ray_backend, signal):
    def slow(sig, value):
        ray_backend.get(sig.wait.remote())
        return value

    log = ray_backend.remote(Log).remote()
    first = log.add.remote(ray_backend.remote(slow).remote(signal, "first"))
    later = [log.add.remote(f"ready-{i}") for i in range(3)]
    # The later calls must wait behind the first, whose argument is not computed yet.
    ready, _ = ray_backend.wait(later, num_returns=1, timeout=0.5)
    assert ready == []
    signal.send.remote()
    assert ray_backend.get([first] + later, timeout=60) == ["first", "ready-0", "ready-1", "ready-2"]
    assert ray_backend.get(log.entries_so_far.remote()) == ["first", "ready-0", "ready-1", "ready-2"]


def test_order_kept_from_a_task_caller(ray_backend):
    log = ray_backend.remote(Log).remote()

    def submit(target, n):
        return ray_backend.get([target.add.remote(i) for i in range(n)])

    assert ray_backend.get(ray_backend.remote(submit).remote(log, 20)) == list(range(20))
    assert ray_backend.get(log.entries_so_far.remote()) == list(range(20))


def test_sync_actor_runs_one_call_at_a_time(ray_backend, signal):
    # A blocked call keeps the next one from starting on a plain actor.
    class Gate:
        def block(self, sig):
            ray_backend.get(sig.wait.remote())
            return "unblocked"

        def ping(self):
            return "ping"

    gate = ray_backend.remote(Gate).remote()
    blocked = gate.block.remote(signal)
    ping = gate.ping.remote()
    ready, _ = ray_backend.wait([ping], timeout=0.5)
    assert ready == []
    signal.send.remote()
    assert ray_backend.get([blocked, ping], timeout=60) == ["unblocked", "ping"]


# --- concurrency ----------------------------------------------------------------------------------


def test_threaded_actor_runs_calls_concurrently(ray_backend):
    meeting = ray_backend.remote(ThreadedMeeting).options(max_concurrency=2).remote(2)
    assert ray_backend.get([meeting.meet.remote(0), meeting.meet.remote(1)], timeout=120) == [0, 1]


def test_threaded_actor_max_concurrency_in_decorator(ray_backend):
    meeting = ray_backend.remote(max_concurrency=3)(ThreadedMeeting).remote(3)
    assert sorted(ray_backend.get([meeting.meet.remote(i) for i in range(3)], timeout=120)) == [0, 1, 2]


def test_async_actor_runs_calls_concurrently(ray_backend):
    meeting = ray_backend.remote(AsyncMeeting).remote()
    waiters = [meeting.wait_open.remote(i) for i in range(3)]
    # wait_open calls are parked in the actor; open() must still get in.
    assert ray_backend.get(meeting.open.remote(), timeout=60) == "opened"
    assert ray_backend.get(waiters, timeout=60) == [0, 1, 2]
    assert ray_backend.get(meeting.completed.remote()) == [0, 1, 2]


def test_async_actor_awaits_object_refs(ray_backend):
    meeting = ray_backend.remote(AsyncMeeting).remote()
    square = ray_backend.remote(lambda x: x * x)
    assert ray_backend.get(meeting.resolve.remote([square.remote(7)]), timeout=60) == 49
    assert ray_backend.get(meeting.resolve.remote([ray_backend.put("put")]), timeout=60) == "put"


def test_async_actor_method_error(ray_backend):
    class AsyncFail:
        async def fail(self):
            await asyncio.sleep(0)
            raise KeyError("async boom")

        async def ok(self):
            return "ok"

    a = ray_backend.remote(AsyncFail).remote()
    with pytest.raises(KeyError):
        ray_backend.get(a.fail.remote(), timeout=60)
    assert ray_backend.get(a.ok.remote(), timeout=60) == "ok"


# --- class features ------------------------------------------------------------------------------


def test_class_and_static_attributes(ray_backend):
    actor = ray_backend.remote(WithClassFeatures).remote()
    assert ray_backend.get(actor.use_all.remote()) == (5, 6, 12, "WithClassFeatures", 2)


def test_static_method_called_through_handle(ray_backend):
    actor = ray_backend.remote(WithClassFeatures).remote()
    assert ray_backend.get(actor.double.remote(21)) == 42


def test_class_attribute_change_stays_in_actor_process(ray_backend):
    actor = ray_backend.remote(WithClassFeatures).remote()
    assert ray_backend.get(actor.bump_shared.remote()) == 105
    assert WithClassFeatures.shared == 5


def test_class_attributes_not_reachable_on_handle(ray_backend):
    actor = ray_backend.remote(WithClassFeatures).remote()
    with pytest.raises(AttributeError):
        actor.shared


def test_inheritance(ray_backend):
    actor = ray_backend.remote(Derived).remote(2, 3)
    assert ray_backend.get(actor.describe.remote()) == "derived:derived:2"
    assert ray_backend.get(actor.base_only.remote()) == 20
    assert ray_backend.get(actor.both.remote()) == 5
    base = ray_backend.remote(Base).remote(1)
    assert ray_backend.get(base.describe.remote()) == "base:base:1"
    with pytest.raises(AttributeError):
        base.both.remote()


# --- named actors ------------------------------------------------------------------------------------


def test_named_actor_lookup(ray_backend):
    counter = ray_backend.remote(Counter).options(name="lookup-me").remote(7)
    found = ray_backend.get_actor("lookup-me")
    assert ray_backend.get(found.incr.remote()) == 8
    assert ray_backend.get(counter.value.remote()) == 8
    ray_backend.kill(counter)


def test_named_actor_lookup_from_task(ray_backend):
    counter = ray_backend.remote(Counter).options(name="task-lookup").remote()

    def bump():
        return ray_backend.get(ray_backend.get_actor("task-lookup").incr.remote())

    assert ray_backend.get(ray_backend.remote(bump).remote()) == 1
    ray_backend.kill(counter)


def test_missing_named_actor_is_value_error(ray_backend):
    with pytest.raises(ValueError):
        ray_backend.get_actor("never-created")


def test_name_conflict_is_value_error(ray_backend):
    first = ray_backend.remote(Counter).options(name="taken").remote()
    with pytest.raises(ValueError):
        ray_backend.remote(Counter).options(name="taken").remote()
    ray_backend.kill(first)


def test_get_if_exists_returns_the_existing_actor(ray_backend):
    first = ray_backend.remote(Counter).options(name="shared-counter", get_if_exists=True).remote(1)
    again = ray_backend.remote(Counter).options(name="shared-counter", get_if_exists=True).remote(1000)
    ray_backend.get(first.incr.remote())
    assert ray_backend.get(again.value.remote()) == 2
    ray_backend.kill(first)


def test_get_if_exists_from_racing_tasks_gives_them_one_actor(ray_backend):
    def get_or_create(name):
        actor = ray_backend.remote(Counter).options(name=name, namespace="racing", lifetime="detached",
                                                    get_if_exists=True).remote()
        return ray_backend.get(actor.pid.remote())

    task = ray_backend.remote(get_or_create)
    for round_ in range(5):
        name = f"raced-{round_}"
        assert len(set(ray_backend.get([task.remote(name) for _ in range(4)]))) == 1
        ray_backend.kill(ray_backend.get_actor(name, namespace="racing"))


def test_get_if_exists_creates_when_missing(ray_backend):
    made = ray_backend.remote(Counter).options(name="fresh-counter", get_if_exists=True).remote(9)
    assert ray_backend.get(made.value.remote()) == 9
    ray_backend.kill(made)


def test_named_actor_namespaces(ray_backend):
    here = ray_backend.remote(Counter).options(name="ns-actor").remote(1)
    there = ray_backend.remote(Counter).options(name="ns-actor", namespace="elsewhere").remote(2)
    assert ray_backend.get(ray_backend.get_actor("ns-actor").value.remote()) == 1
    assert ray_backend.get(ray_backend.get_actor("ns-actor", namespace="elsewhere").value.remote()) == 2
    with pytest.raises(ValueError):
        ray_backend.get_actor("ns-actor", namespace="nowhere")
    ray_backend.kill(here)
    ray_backend.kill(there)


@pytest.mark.parametrize("name", ["typed-ns", None])
def test_namespace_that_is_not_a_string_is_refused(ray_backend, name):
    with pytest.raises(TypeError):
        ray_backend.remote(Counter).options(name=name, namespace=object()).remote(1)
    with pytest.raises(TypeError):
        ray_backend.remote(namespace=7)(Counter)


def test_name_is_free_again_after_kill(ray_backend):
    first = ray_backend.remote(Counter).options(name="reusable").remote(1)
    ray_backend.get(first.value.remote())
    ray_backend.kill(first)
    deadline_tries = 200
    for _ in range(deadline_tries):  # Ray frees the name asynchronously
        try:
            second = ray_backend.remote(Counter).options(name="reusable").remote(2)
            break
        except ValueError:
            import time
            time.sleep(0.05)
    else:
        pytest.fail("name never freed after kill")
    assert ray_backend.get(ray_backend.get_actor("reusable").value.remote()) == 2
    ray_backend.kill(second)


def test_name_is_free_again_once_the_last_handle_is_gone(ray_backend):
    actor_class = ray_backend.remote(Counter)

    def make_and_use(start):
        counter = actor_class.options(name="scoped-name").remote(start)
        return ray_backend.get(counter.incr.remote())

    # A function that creates a named actor can be called twice: its handle went with its frame.
    # Ray releases the name asynchronously once the actor is gone, so the second creation may
    # have to wait for it; what both backends guarantee is that the name does come free.
    second = []

    def name_came_free():
        try:
            second.append(make_and_use(10))
        except ray_backend.exceptions.ActorAlreadyExistsError:
            return False
        return True

    first = make_and_use(1)
    wait_until(name_came_free)
    assert [first, second] == [2, [11]]


# --- kill ---------------------------------------------------------------------------------------------


def test_kill_fails_pending_and_later_calls(ray_backend, signal):
    class Blocker:
        def block(self, sig):
            ray_backend.get(sig.wait.remote())

        def ping(self):
            return "ping"

    actor = ray_backend.remote(Blocker).remote()
    assert ray_backend.get(actor.ping.remote()) == "ping"
    pending = actor.block.remote(signal)
    queued = actor.ping.remote()
    ray_backend.kill(actor)
    for ref in (pending, queued, actor.ping.remote()):
        with pytest.raises(ray_backend.exceptions.RayActorError):
            ray_backend.get(ref, timeout=60)


def test_kill_is_idempotent(ray_backend):
    actor = ray_backend.remote(Counter).remote()
    ray_backend.get(actor.value.remote())
    ray_backend.kill(actor)
    ray_backend.kill(actor)
    wait_until_calls_fail(ray_backend, actor.value.remote)


def test_kill_rejects_non_handles(ray_backend):
    with pytest.raises(ValueError):
        ray_backend.kill("not an actor")
