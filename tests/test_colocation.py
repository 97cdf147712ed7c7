"""Co-located actors (init(_colocate=True)): several actors per host process, each with Ray's semantics.

Every scenario runs on real Ray, on rayreact with actors co-located, and co-located with the scenario
repeated until it replays; the assertions are what a script can observe either way (results, which
actors die with a process, the generators each actor draws from).  What only co-location has (where
actors went, why some went apart) is checked on rayreact alone.
"""

import os
import random
import signal
import time

import numpy as np
import pytest
import torch

from conftest import wait_until, wait_until_calls_fail

from rayreact.core.colocation import class_refusal, function_refusal

GET_TIMEOUT = 120                   # a deadline against a hang, never reached when things work
COLOCATED = "rayreact-colocated"
COLOCATED_REPLAY = "rayreact-colocated-replay"


@pytest.fixture(scope="module", params=["ray", COLOCATED, COLOCATED_REPLAY])
def ray(request):
    import importlib
    name = request.param
    module = importlib.import_module("ray" if name == "ray" else "rayreact")
    if module.is_initialized():
        module.shutdown()
    extra = {} if name == "ray" else {"_colocate": True, "_reactor": name == COLOCATED_REPLAY}
    module.init(num_cpus=2, include_dashboard=False, **extra)
    _running["name"] = name
    yield module
    module.shutdown()


_running = {}                              # the backend this module's scenarios run on now


def _backend_name():
    return _running["name"]


def _repeats(ray):
    """How often a scenario runs: until its loop replays, with the reactor on."""
    return 3 if _backend_name() == COLOCATED_REPLAY else 1


class Sampler:
    """Seeds the global generators in its constructor, as RL actors do, and draws from them per call."""

    def __init__(self, seed):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def draw(self, k):
        return [k, random.random(), float(np.random.rand()), float(torch.rand(1))]

    def pid(self):
        return os.getpid()


def _expected_draws(seed, n):
    r, rs, g = random.Random(seed), np.random.RandomState(seed), torch.Generator().manual_seed(seed)
    return [[k, r.random(), float(rs.rand()), float(torch.rand(1, generator=g))] for k in range(n)]


def test_actors_seeding_the_global_generators_each_draw_their_own_streams(ray):
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(6)]
    for _ in range(_repeats(ray)):
        for s in samplers:
            ray.get(s.pid.remote())
        rows = [ray.get([s.draw.remote(k) for s in samplers]) for k in range(60)]
        for seed in range(6):
            assert [row[seed] for row in rows] == _expected_draws(seed, 60)
        samplers = [ray.remote(Sampler).remote(seed) for seed in range(6)]


class Unseeded:
    def draw(self):
        return float(np.random.rand()), random.random()


def test_unseeded_actors_draw_different_numbers(ray):
    a, b = ray.remote(Unseeded).remote(), ray.remote(Unseeded).remote()
    first = ray.get([a.draw.remote() for _ in range(5)])
    second = ray.get([b.draw.remote() for _ in range(5)])
    assert first != second          # as in processes of their own: streams seeded apart


class Producer:
    def __init__(self):
        self.made = 0

    def make(self, x):
        self.made += 1
        return x * 10


def _backend():
    """The API module as seen inside a worker (rayreact's, or Ray's)."""
    import rayreact
    return rayreact if rayreact.is_initialized() else __import__("ray")


class Caller:
    def ask(self, other, x):
        return _backend().get(other.make.remote(x), timeout=GET_TIMEOUT) + 1


def test_an_actor_blocked_in_get_lets_a_co_hosted_actor_run_the_call_it_waits_for(ray):
    # Placed in turn on the hosts: callers[k] and producers[k] share one.  The producer's call is made by
    # the caller's method, so it can run only while that method waits in get.
    callers = [ray.remote(Caller).remote() for _ in range(2)]
    producers = [ray.remote(Producer).remote() for _ in range(2)]
    for _ in range(_repeats(ray)):
        asked = [c.ask.remote(p, i) for i in range(20) for c, p in zip(callers, producers)]
        assert ray.get(asked, timeout=GET_TIMEOUT) == [10 * i + 1 for i in range(20) for _ in range(2)]


class Blocker:
    def wait_then_add(self, refs, y):
        return _backend().get(refs[0], timeout=GET_TIMEOUT) + y


def test_an_actor_waiting_on_a_later_call_of_a_co_hosted_actor_is_not_stalled(ray):
    actors = [ray.remote(Blocker).remote() for _ in range(2)] + [ray.remote(Producer).remote() for _ in range(2)]
    blockers, producers = actors[:2], actors[2:]
    for _ in range(_repeats(ray)):
        results = []
        for i in range(30):
            later = [p.make.remote(i) for p in producers]
            results.extend(b.wait_then_add.remote([r], 1) for b, r in zip(blockers, reversed(later)))
        assert ray.get(results, timeout=GET_TIMEOUT) == [10 * i + 1 for i in range(30) for _ in range(2)]


def test_killing_one_actor_leaves_the_others(ray):
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(4)]
    ray.get([s.pid.remote() for s in samplers])
    ray.kill(samplers[1])
    wait_until_calls_fail(ray, lambda: samplers[1].draw.remote(0))      # (Ray's kill lands asynchronously)
    others = [samplers[0], samplers[2], samplers[3]]
    assert [row[0] for row in ray.get([s.draw.remote(7) for s in others])] == [7, 7, 7]


class Spinner:
    def spin(self, started):
        open(started, "w").close()
        while True:                     # never returns: only the kill ends it
            pass

    def ping(self):
        return "pong"


def test_killing_an_actor_stuck_in_a_loop_leaves_the_others_responsive(ray, tmp_path):
    # Co-located, the loop runs on a thread of the host that also runs spinners[2]: the kill must stop it
    # there, as killing its process does on Ray, or the host's other actors would wait for it for ever.
    spinners = [ray.remote(Spinner).remote() for _ in range(4)]
    assert ray.get([s.ping.remote() for s in spinners], timeout=GET_TIMEOUT) == ["pong"] * 4
    started = tmp_path / "spinning"
    stuck = [spinners[0].spin.remote(str(started)) for _ in range(2)]    # (the second waits behind the first)
    wait_until(started.exists, timeout=GET_TIMEOUT)     # (killed before it starts, the loop never runs)
    ray.kill(spinners[0])
    for ref in stuck:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(ref, timeout=GET_TIMEOUT)
    for _ in range(_repeats(ray)):
        assert ray.get([s.ping.remote() for s in spinners[1:]], timeout=GET_TIMEOUT) == ["pong"] * 3


class Quitter:
    def quit(self):
        _backend().actor.exit_actor()

    def ping(self):
        return "pong"


def test_exit_actor_ends_only_that_actor(ray):
    quitters = [ray.remote(Quitter).remote() for _ in range(4)]
    assert ray.get([q.ping.remote() for q in quitters]) == ["pong"] * 4
    quitters[0].quit.remote()
    wait_until_calls_fail(ray, quitters[0].ping.remote)
    assert ray.get([q.ping.remote() for q in quitters[1:]]) == ["pong"] * 3


def test_a_killed_process_fails_exactly_the_actors_it_ran(ray):
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(4)]
    pids = ray.get([s.pid.remote() for s in samplers])
    os.kill(pids[0], signal.SIGKILL)
    for s, pid in zip(samplers, pids):
        if pid == pids[0]:
            wait_until_calls_fail(ray, lambda s=s: s.draw.remote(0))
        else:
            assert ray.get(s.draw.remote(3), timeout=GET_TIMEOUT)[0] == 3


def test_a_process_killed_during_a_replayed_loop_with_tasks_fails_exactly_the_actors_it_ran(ray):
    # Co-located and replayed, the loop's task calls run in a host too: killing it mid-loop fails its actors'
    # calls (and no get hangs); the other host's actors go on with their own streams.
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(4)]
    pids = ray.get([s.pid.remote() for s in samplers], timeout=GET_TIMEOUT)
    double = ray.remote(sleep_then_double)
    expected = [_expected_draws(seed, 101) for seed in range(4)]
    for k in range(100):
        rows = ray.get([double.remote(s.draw.remote(k)) for s in samplers], timeout=GET_TIMEOUT)
        assert rows == [2 * expected[seed][k] for seed in range(4)]        # (a list doubled: twice over)
    os.kill(pids[0], signal.SIGKILL)
    for seed, (s, pid) in enumerate(zip(samplers, pids)):
        if pid == pids[0]:
            wait_until_calls_fail(ray, lambda s=s: s.draw.remote(0))
        else:
            assert ray.get(s.draw.remote(100), timeout=GET_TIMEOUT) == expected[seed][100]


def test_a_kill_during_a_replayed_loop_fails_only_that_actor(ray):
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(4)]
    for k in range(100):
        assert [row[0] for row in ray.get([s.draw.remote(k) for s in samplers], timeout=GET_TIMEOUT)] == [k] * 4
    ray.kill(samplers[1])
    wait_until_calls_fail(ray, lambda: samplers[1].draw.remote(0))
    others = [0, 2, 3]
    for k in range(100, 140):
        rows = ray.get([samplers[i].draw.remote(k) for i in others], timeout=GET_TIMEOUT)
        assert rows == [_expected_draws(i, k + 1)[k] for i in others]


class Holder:
    def __init__(self):
        self.calls = 0

    def hold(self, path):
        self.calls += 1
        while not os.path.exists(path):      # (waits for the test to say so, then returns)
            time.sleep(0.01)
        return self.calls

    def count(self):
        self.calls += 1
        return self.calls


def test_a_kill_of_a_busy_restartable_actor_fails_its_call_and_restarts_it_at_once(ray, tmp_path):
    holder = ray.remote(Holder).options(max_restarts=1).remote()
    assert ray.get(holder.count.remote()) == 1
    gate = tmp_path / "open"
    busy = holder.hold.remote(str(gate))
    ray.kill(holder, no_restart=False)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(busy, timeout=GET_TIMEOUT)
    after = None
    for _ in range(200):                     # (a call made while it restarts may fail: Ray says unavailable)
        try:
            after = ray.get(holder.count.remote(), timeout=GET_TIMEOUT)
            break
        except ray.exceptions.RayActorError:
            continue
    assert after == 1                        # a fresh instance, though the killed call never returned
    gate.touch()


class Spawner:
    def __init__(self, seed):
        np.random.seed(seed)

    def draw_in_a_thread(self):
        import threading
        out = []
        t = threading.Thread(target=lambda: out.append(float(np.random.rand())))
        t.start()
        t.join()
        return out[0]

    def a_generator_function(self):
        return np.random.normal


def test_a_thread_an_actor_starts_draws_from_that_actor_s_generators(ray):
    spawners = [ray.remote(Spawner).remote(seed) for seed in range(4)]
    got = ray.get([s.draw_in_a_thread.remote() for s in spawners])
    assert got == [float(np.random.RandomState(seed).rand()) for seed in range(4)]


def test_a_module_generator_function_returned_by_an_actor_pickles(ray):
    fn = ray.get(ray.remote(Spawner).remote(0).a_generator_function.remote())
    assert fn.__name__ == "normal" and isinstance(float(fn()), float)


def test_a_replayed_loop_of_co_located_actors_gives_the_dynamic_results(ray):
    samplers = [ray.remote(Sampler).remote(seed) for seed in range(8)]
    rows = [ray.get([s.draw.remote(k) for s in samplers]) for k in range(200)]
    for seed in range(8):
        assert [row[seed] for row in rows] == _expected_draws(seed, 200)
    if _backend_name() == COLOCATED_REPLAY:
        assert ray.explain(quiet=True).periods_replayed >= 100
    if _backend_name() != "ray":
        assert len(set(ray.get([s.pid.remote() for s in samplers]))) <= 2     # one host per CPU


class Stage:
    """Returns the one buffer it overwrites on every call: each reader must get it as it was at return."""

    def __init__(self, k):
        self.k = k
        self.scratch = np.zeros(4)
        self.seen = []

    def work(self, x):
        self.seen.append(float(np.sum(x)))
        self.scratch[:] = np.asarray(x) + self.k
        return self.scratch

    def history(self):
        return self.seen


def test_values_between_co_located_actors_are_snapshots_when_the_chain_runs_ahead(ray):
    # Co-located and replayed, the host steps a stage through its queued calls before the next stage reads
    # their results: that stage must still see each result as it was returned, as in Ray.  (Actors go to the
    # hosts in turn, so this order makes each other hop one between co-hosted actors.)
    made = [ray.remote(Stage).remote(k) for k in (1, 10, 100, 1000)]
    stages = [made[0], made[2], made[1], made[3]]
    runs = 4 if _backend_name() == COLOCATED_REPLAY else 1
    for run in range(runs):
        finals = []
        for i in range(40):
            ref = np.full(4, float(i))
            for stage in stages:
                ref = stage.work.remote(ref)
            finals.append(ref)
        assert [list(v) for v in ray.get(finals, timeout=GET_TIMEOUT)] == [[i + 1111.0] * 4 for i in range(40)]
    histories = ray.get([s.history.remote() for s in stages], timeout=GET_TIMEOUT)
    expected_inputs = [[4.0 * (i + offset) for i in range(40)] * runs for offset in (0, 1, 101, 111)]
    assert histories == expected_inputs


class Junction:
    """An env actor: each step takes every agent's action and returns the joint observation."""

    def __init__(self):
        self.t = 0
        self.taken = []

    def reset(self):
        return np.arange(6.0)

    def step(self, *actions):
        self.t += 1
        self.taken.append(list(actions))
        return np.arange(6.0) * self.t + sum(actions)

    def history(self):
        return self.taken


def own_view(joint, i):
    return joint[2 * i:2 * i + 2]


class Agent:
    def __init__(self, k):
        self.k = k

    def act(self, view):
        return int(view.sum()) % 5 + self.k


def _junction_in_process(steps):
    env, agents = Junction(), [Agent(k) for k in range(3)]
    obs = env.reset()
    for _ in range(steps):
        obs = env.step(*[a.act(own_view(obs, i)) for i, a in enumerate(agents)])
    return list(obs), env.history()


def test_a_loop_of_tasks_between_co_located_actors_gives_the_results_of_one_process(ray):
    # env actor -> a task per agent picking its view -> the agent's actor -> the env: co-located and
    # replayed, the tasks run in the host beside the actors whose values they take and make.
    env = ray.remote(Junction).remote()
    agents = [ray.remote(Agent).remote(k) for k in range(3)]
    view = ray.remote(own_view)
    obs = env.reset.remote()
    for _ in range(150):
        obs = env.step.remote(*[a.act.remote(view.remote(obs, i)) for i, a in enumerate(agents)])
    final, history = ray.get([obs, env.history.remote()], timeout=GET_TIMEOUT)
    assert (list(final), history) == _junction_in_process(150)
    if _backend_name() == COLOCATED_REPLAY:
        report = ray.explain(quiet=True)
        assert report.periods_replayed >= 100
        assert "task own_view: replayed in a host, beside the actors it exchanges values with" in str(report)


class Tally:
    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1
        return self.n

    def peek(self):
        return self.n


def read_back(n, tally_actor):
    return n, _backend().get(tally_actor.peek.remote(), timeout=GET_TIMEOUT)


def sleep_then_double(x):
    time.sleep(0.001)
    return 2 * x


def test_a_task_in_the_loop_may_call_the_actor_whose_result_it_reads(ray):
    # Replayed and co-located, the task runs in the actor's host; its nested get needs that actor's reactor to
    # run the call it makes while the task waits, and a sleeping task must not stall the actor either.
    counter = ray.remote(Tally).remote()
    read, double = ray.remote(read_back), ray.remote(sleep_then_double)
    rows = []
    for i in range(80):
        n = counter.bump.remote()
        rows.append((read.remote(n, counter), double.remote(n)))
    for i, ((n, seen), twice) in enumerate(ray.get(list(r), timeout=GET_TIMEOUT) for r in rows):
        assert n == i + 1 and seen >= n and twice == 2 * n


# ---------------------------------------------------------------------- what only co-location has
class Threaded:
    def ping(self):
        return os.getpid()


COUNTER = 0


class WritesAGlobal:
    def bump(self):
        global COUNTER
        COUNTER += 1
        return COUNTER


class WritesItsClass:
    total = 0

    def bump(self):
        WritesItsClass.total += 1
        return WritesItsClass.total


class KeepsItsOwnState:
    total = 0                            # a default the instance shadows: not shared

    def bump(self):
        self.total += 1
        return self.total


def test_explain_says_where_actors_went_and_why_some_went_apart(ray):
    if _backend_name() == "ray":
        return                           # (Ray has no co-location to explain)
    apart = [ray.remote(Threaded).options(max_concurrency=4).remote(), ray.remote(WritesAGlobal).remote(),
             ray.remote(WritesItsClass).remote()]
    together = [ray.remote(KeepsItsOwnState).remote() for _ in range(3)]
    assert ray.get(apart[0].ping.remote()) != os.getpid()
    assert ray.get([a.bump.remote() for a in apart[1:]]) == [1, 1]
    assert ray.get([t.bump.remote() for t in together]) == [1, 1, 1]
    report = str(ray.explain(quiet=True))
    assert "co-location:" in report
    assert "KeepsItsOwnState on host pid" in report
    assert "Threaded in a process of its own: a threaded actor (max_concurrency=4)" in report
    assert "WritesAGlobal in a process of its own: WritesAGlobal.bump assigns the module global 'COUNTER'" in report
    assert "WritesItsClass in a process of its own: WritesItsClass.bump assigns the class attribute 'total'" \
        in report


TALLY = []


def tally(x):
    TALLY.append(x)
    return np.array([x, 1.0])


def bump_counter(x):
    global COUNTER
    COUNTER += x
    return COUNTER


def test_a_task_writing_module_state_replays_on_a_pool_worker(ray):
    if _backend_name() != COLOCATED_REPLAY:
        return                           # (only replay runs tasks in hosts)
    agents = [ray.remote(Agent).remote(k) for k in range(2)]
    count = ray.remote(tally)
    for i in range(60):
        assert ray.get([a.act.remote(count.remote(i)) for a in agents], timeout=GET_TIMEOUT) == [(i + 1) % 5,
                                                                                               (i + 1) % 5 + 1]
    report = str(ray.explain(quiet=True))
    assert "task tally: replayed on a pool worker: tally mutates the module-level list 'TALLY'" in report


def test_function_refusal_reads_what_a_task_writes():
    assert function_refusal(own_view) is None
    assert function_refusal(_junction_in_process) is None
    assert "mutates the module-level list 'TALLY'" in function_refusal(tally)
    assert "assigns the module global 'COUNTER'" in function_refusal(bump_counter)

    def nested_writer(x):
        def inner():
            TALLY.append(x)
        inner()

    assert "mutates the module-level list 'TALLY'" in function_refusal(nested_writer)


def test_class_refusal_reads_what_methods_assign():
    assert class_refusal(KeepsItsOwnState) is None
    assert class_refusal(Sampler) is None
    assert "module global 'COUNTER'" in class_refusal(WritesAGlobal)
    assert "class attribute 'total'" in class_refusal(WritesItsClass)

    class ViaType:
        hits = 0

        def hit(self):
            type(self).hits += 1

    class ViaClassmethod:
        n = 0

        @classmethod
        def bump(cls):
            cls.n += 1

    class Decorated:
        @torch.no_grad()
        def step(self):
            Decorated.steps = 1

    class SharedList:
        seen = []

    class NamesItsClassOnly:
        lr = 0.1                             # a default each instance shadows

        def __init__(self, lr):
            self.lr = lr
            self.name = f"{self.__class__.__name__}:{type(self).__name__}"

    assert "class attribute 'hits'" in class_refusal(ViaType)
    assert "class attribute 'n'" in class_refusal(ViaClassmethod)
    assert "class attribute 'steps'" in class_refusal(Decorated)
    assert "class-level list 'seen'" in class_refusal(SharedList)
    assert "module-level dict 'REGISTRY'" in class_refusal(Registers)
    assert class_refusal(NamesItsClassOnly) is None


REGISTRY = {}


class Registers:
    def register(self, key):
        REGISTRY[key] = self
