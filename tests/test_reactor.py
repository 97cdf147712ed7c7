"""Replay equivalence and fallbacks: every script gives the same results with the reactor on, off, and on real Ray.

Each test runs a small RL-shaped loop and returns (or asserts on) everything
the script saw.  The same test runs on three backends: rayreact with the
reactor on (``rayreact``), rayreact with ``init(_reactor=False)``
(``rayreact-off``) and real Ray (``ray``).  Results are compared against
values computed in-process where that is possible, and on ``rayreact`` the
test also checks that replay actually ran (``explain().periods_replayed``)
and, for the fallback scripts, that the reactor fell back.
"""

import os
import signal
import threading

import numpy as np
import pytest

from conftest import named_backend_fixture, wait_for_file, wait_until_calls_fail

BACKENDS = ["rayreact", "rayreact-off", "ray"]


rb = named_backend_fixture(BACKENDS)


class Backend:
    """The backend module as a test uses it, with what this module notes beside it (never set on the
    module itself: other test modules see the module as the user does)."""

    def __init__(self, module, backend_name, baseline=(0, 0)):
        self._module = module
        self.backend_name = backend_name
        self.baseline = baseline             # (runs, fallbacks) of the reactor before the test

    def __getattr__(self, name):
        return getattr(self._module, name)


@pytest.fixture
def ray(rb):
    """The backend module, with the reactor (if on) recording afresh for this test."""
    name, module = rb
    reactor = _reactor(module) if name == "rayreact" else None
    if reactor is None:
        return Backend(module, name)
    reactor.reset()
    snap = reactor.snapshot()
    return Backend(module, name, (len(snap["runs"]), len(snap["fallbacks"])))


def _reactor(module):
    from rayreact.core import context
    return context.current.reactor


def runs_of_this_test(ray):
    return _reactor(ray).snapshot()["runs"][ray.baseline[0]:]


def periods_replayed(ray):
    """Periods replayed since this test began (rayreact with the reactor on only)."""
    if ray.backend_name != "rayreact":
        return None
    return sum(r["periods"] for r in runs_of_this_test(ray))


def fallback_reasons(ray):
    return [reason for _, reason, _ in _reactor(ray).snapshot()["fallbacks"][ray.baseline[1]:]]


def expect_replayed(ray, at_least):
    if ray.backend_name == "rayreact":
        n = periods_replayed(ray)
        assert n >= at_least, f"replayed {n} periods, expected at least {at_least}: {ray.explain(quiet=True)}"


def expect_fallback(ray, fragment):
    if ray.backend_name == "rayreact":
        reasons = fallback_reasons(ray)
        assert any(fragment in r for r in reasons), reasons


# ---------------------------------------------------------------------- actors used below
class Env:
    """A deterministic env: the observation is (seed, step count + action), episodes of ``length`` steps."""

    def __init__(self, seed, length=7):
        self.seed = seed
        self.length = length
        self.t = 0
        self.calls = []

    def reset(self):
        self.t = 0
        return np.array([self.seed, 0.0])

    def step(self, action):
        self.t += 1
        self.calls.append(("step", float(action)))
        done = self.t % self.length == 0
        return np.array([self.seed, self.t + float(action)]), float(self.t), done

    def step2(self, action):
        obs, reward, done = self.step(action)
        return obs, reward

    def history(self):
        return self.calls

    def pid(self):
        return os.getpid()

    def fail_at(self, n):
        self.fail_step = n

    def risky(self, x):
        self.t += 1
        if self.t == getattr(self, "fail_step", -1):
            raise ValueError(f"bad step {self.t}")
        return self.t + x

    def risky_pair(self, x):
        """A generator for two returns that fails between them at the step set by ``fail_at``."""
        self.t += 1
        yield self.t + x
        if self.t == getattr(self, "fail_step", -1):
            raise ValueError(f"bad step {self.t}")
        yield float(self.t)


class Policy:
    def __init__(self, scale=0.5):
        self.scale = scale
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        return float(obs[1]) * self.scale + self.calls

    def load(self, weights):
        self.weights = weights
        return float(np.sum(weights)) + self.calls

    def echo(self, x):
        return x

    def total(self):
        return self.calls


def remote(ray, cls, *args, **options):
    return (ray.remote(**options)(cls) if options else ray.remote(cls)).remote(*args)


def local_env_steps(seed, actions, length=7):
    env = Env(seed, length)
    return [env.step(a) for a in actions]


def same(a, b):
    """Structural equality that treats numpy arrays by value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------------- fixed patterns
def test_broadcast_gather(ray):
    envs = [remote(ray, Env, i) for i in range(4)]
    rounds = 300
    seen = []
    for i in range(rounds):
        seen.append(ray.get([e.step.remote(i % 3) for e in envs]))
    for k in range(4):
        expected = local_env_steps(k, [i % 3 for i in range(rounds)])
        assert same([row[k] for row in seen], expected)
    expect_replayed(ray, 200)


def test_chain_with_loop_carried_ref_and_two_returns(ray):
    env, policy = remote(ray, Env, 3), remote(ray, Policy)
    obs = env.reset.remote()
    rewards = []
    for i in range(300):
        act = policy.act.remote(obs)
        obs, reward = env.step2.options(num_returns=2).remote(act)
        rewards.append(ray.get(reward))
    final = ray.get(obs)
    local_env, local_policy = Env(3), Policy()
    o = local_env.reset()
    for r in rewards:
        o, rew = local_env.step2(local_policy.act(o))
        assert rew == r
    assert same(final, o)
    assert ray.get(policy.total.remote()) == 300
    expect_replayed(ray, 200)


def test_put_broadcast_each_round(ray):
    policies = [remote(ray, Policy) for _ in range(3)]
    out = []
    for i in range(200):
        weights = ray.put(np.full(8, i, dtype=np.float64))
        out.append(ray.get([p.load.remote(weights) for p in policies]))
    assert out == [[8.0 * i] * 3 for i in range(200)]
    expect_replayed(ray, 100)


def test_large_arguments_and_results(ray):
    policies = [remote(ray, Policy) for _ in range(2)]
    for i in range(120):
        big = np.full(50_000, float(i))                   # 400 KB: a shared segment each way
        echoed = ray.get([p.echo.remote(big) for p in policies])
        for e in echoed:
            assert e.shape == big.shape and e[0] == float(i) and e[-1] == float(i)
            assert not e.flags.writeable
    expect_replayed(ray, 60)


def test_pipelined_gather_reads_the_previous_round(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    pending = [e.step.remote(0) for e in envs]
    seen = []
    for i in range(1, 250):
        ahead = [e.step.remote(i) for e in envs]
        seen.append(ray.get(pending))
        pending = ahead
    seen.append(ray.get(pending))
    for k in range(2):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(250))))
    expect_replayed(ray, 150)


def test_wait_then_get(ray):
    envs = [remote(ray, Env, i) for i in range(3)]
    seen = []
    for i in range(200):
        refs = [e.step.remote(i) for e in envs]
        ready, rest = ray.wait(refs, num_returns=3)
        assert len(ready) == 3 and rest == []
        seen.append(ray.get(refs))
    for k in range(3):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(200))))
    expect_replayed(ray, 100)


def test_arguments_are_snapshots_and_results_read_only(ray):
    policy = remote(ray, Policy)
    buf = np.zeros(4)
    for i in range(200):
        buf[:] = i
        ref = policy.echo.remote(buf)
        buf[:] = -1                                     # after submission: never seen by the callee
        got = ray.get(ref)
        assert list(got) == [float(i)] * 4
        assert not got.flags.writeable
        with pytest.raises(ValueError):
            got[0] = 5
    expect_replayed(ray, 100)


def test_one_array_to_many_actors_changed_between_the_calls(ray):
    # Replay pickles an argument passed unchanged to the next call once: a change in between,
    # to its bytes or its shape or dtype in place, must reach the later calls, and only them.
    policies = [remote(ray, Policy) for _ in range(3)]
    obs = np.zeros(1350, np.float32)
    seen = []
    for i in range(120):
        obs[:] = i
        refs = [p.echo.remote(obs) for p in policies]              # the same bytes three times
        if i % 3 == 0:
            obs[-1] = -i                                           # the last byte only
        elif i % 3 == 1:
            obs.shape = (2, 675)                                   # the same memory, another shape
        else:
            obs.dtype = np.int32                                   # and another dtype
        refs.append(policies[0].echo.remote(obs))
        expected = [obs.copy()]
        obs.shape, obs.dtype = (1350,), np.float32
        got = ray.get(refs)
        assert all(np.array_equal(g, np.full(1350, i, np.float32)) for g in got[:3])
        assert got[3].dtype == expected[0].dtype and got[3].shape == expected[0].shape
        assert np.array_equal(got[3], expected[0])
        seen.append(float(got[0][0]))
    assert seen == [float(i) for i in range(120)]
    expect_replayed(ray, 60)


def test_numpy_scalars_and_small_arrays_replay_with_their_types(ray):
    # gym's actions are numpy scalars and its observations small arrays: replay must give back the same types.
    policy = remote(ray, Policy)
    values = [np.int64(3), np.float32(0.5), np.bool_(False), np.arange(4, dtype=np.float32), np.ones((2, 2), ">f8"),
              np.array(1.5), np.asfortranarray(np.ones((2, 3)))]
    for i in range(150):
        sent = [v * i if v.dtype.kind != "b" else v for v in values]
        got = ray.get([policy.echo.remote(v) for v in sent])
        for a, b in zip(sent, got):
            assert type(b) is type(a) and b.dtype == a.dtype and np.shape(b) == np.shape(a)
            assert np.array_equal(a, b)
            if isinstance(b, np.ndarray):
                assert not b.flags.writeable
    expect_replayed(ray, 100)


class Flag(int):
    """An int subclass: equal to an int, pickled as itself."""


def test_scalars_equal_in_value_but_not_in_type_or_sign_each_arrive_as_sent(ray):
    # Replay pickles a list of scalar literals once per distinct value: 0, False, 0.0, -0.0 and numpy's zeros
    # compare equal, and each must still arrive with its own type and sign, round after round.
    policies = [remote(ray, Policy) for _ in range(2)]
    pool = [0, False, 0.0, -0.0, np.int64(0), np.int32(0), np.float32(0), np.float64(-0.0), np.bool_(False),
            None, "", 1, True, 1.0, np.uint8(1), np.float16(1), Flag(1), "a" * 100, 2 ** 70, float("nan")]
    for i in range(150):
        sent = [pool[(i * 7 + k) % len(pool)] for k in range(4)]
        got = ray.get([policies[k % 2].echo.remote(v) for k, v in enumerate(sent)])
        for a, b in zip(sent, got):
            assert type(b) is type(a) and repr(b) == repr(a), (i, a, b)
            if isinstance(a, float):
                assert np.copysign(1.0, b) == np.copysign(1.0, a)
    expect_replayed(ray, 100)


def test_a_serializer_registered_mid_loop_applies_to_scalars_sent_before(ray):
    # Replay keeps the packs of scalar literals it pickled: a serializer registered for their type afterwards
    # must still be used.
    policy = remote(ray, Policy)
    got = []
    try:
        for i in range(150):
            if i == 100:
                ray.util.register_serializer(np.int64, serializer=lambda v: int(v) + 1000,
                                             deserializer=lambda n: np.int64(n))
            got.append(int(ray.get(policy.echo.remote(np.int64(i % 3)))))
    finally:
        ray.util.deregister_serializer(np.int64)
    assert got == [i % 3 + (1000 if i >= 100 else 0) for i in range(150)]
    expect_replayed(ray, 60)


def test_values_held_across_rounds_are_never_overwritten(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    kept = []
    for i in range(200):
        values = ray.get([e.step.remote(i) for e in envs])
        kept.append(values)
    for k in range(2):
        assert same([row[k] for row in kept], local_env_steps(k, list(range(200))))
    expect_replayed(ray, 100)


# ---------------------------------------------------------------------- patterns that change
def test_extra_call_every_kth_iteration(ray):
    envs = [remote(ray, Env, i) for i in range(3)]
    policy = remote(ray, Policy)
    seen, extra = [], []
    for i in range(300):
        seen.append(ray.get([e.step.remote(1) for e in envs]))
        if i % 40 == 39:
            extra.append(ray.get(policy.act.remote(np.array([0.0, float(i)]))))
    for k in range(3):
        assert same([row[k] for row in seen], local_env_steps(k, [1] * 300))
    local = Policy()
    assert extra == [local.act(np.array([0.0, float(i)])) for i in range(300) if i % 40 == 39]
    expect_fallback(ray, "expected")
    expect_replayed(ray, 20)


def test_episode_dependent_branch(ray):
    env, policy = remote(ray, Env, 5, 60), remote(ray, Policy)
    obs = ray.get(env.reset.remote())
    trajectory = []
    for i in range(400):
        obs, reward, done = ray.get(env.step.remote(ray.get(policy.act.remote(obs))))
        trajectory.append((obs, reward, done))
        if done:
            obs = ray.get(env.reset.remote())
    local_env, local_policy = Env(5, length=60), Policy()
    o = local_env.reset()
    for got in trajectory:
        o, r, d = local_env.step(local_policy.act(o))
        assert same(got, (o, r, d))
        if d:
            o = local_env.reset()
    expect_fallback(ray, "expected")
    expect_replayed(ray, 100)


def test_a_different_wait(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    seen = []
    for i in range(300):
        refs = [e.step.remote(i) for e in envs]
        ready, _ = ray.wait(refs, num_returns=1 if i == 200 else 2)
        assert len(ready) >= 1
        seen.append(ray.get(refs))
    for k in range(2):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(300))))
    # A wait only reads: the different one is served off the plan, and replay goes on.
    expect_replayed(ray, 250)
    if ray.backend_name == "rayreact":
        assert not any("wait" in r for r in fallback_reasons(ray))


def test_killed_actor(ray):
    envs = [remote(ray, Env, i) for i in range(3)]
    seen = []
    for i in range(200):
        seen.append(ray.get([e.step.remote(i) for e in envs]))
    ray.kill(envs[1])
    wait_until_calls_fail(ray, lambda: envs[1].step.remote(0))   # Ray's kill is asynchronous
    for i in range(200, 260):
        seen.append(ray.get([envs[0].step.remote(i), envs[2].step.remote(i)]))
    assert same([row[0] for row in seen], local_env_steps(0, list(range(260))))
    assert same([row[-1] for row in seen], local_env_steps(2, list(range(260))))
    expect_fallback(ray, "kill")


class Crashy:
    """Counts its calls; its process dies on the call that gets ``x == crash_at``."""

    def __init__(self):
        self.calls = 0

    def step(self, x, crash_at):
        self.calls += 1
        if x == crash_at:
            os._exit(1)
        return self.calls


def test_restartable_actor_dying_mid_loop(ray):
    # Ray: the call in flight when the process dies fails; the actor restarts (a fresh __init__) and
    # the calls after it run on the new process.  Replay covers the loop before and after the death.
    actor = remote(ray, Crashy, max_restarts=1)
    seen = []
    for i in range(500):
        try:
            seen.append(ray.get(actor.step.remote(i, 200)))
        except ray.exceptions.RayActorError:
            seen.append("died")
    # A call made before the death was noticed may fail too (Ray, on a loaded machine).
    back = next(k for k in range(201, 500) if seen[k] != "died")
    assert seen == list(range(1, 201)) + ["died"] * (back - 200) + list(range(1, 500 - back + 1))
    expect_fallback(ray, "died")
    expect_replayed(ray, 300)


def test_restartable_actor_dying_in_a_gather(ray):
    actors = [remote(ray, Crashy, max_restarts=1) for _ in range(3)]
    seen = []
    for i in range(400):
        try:
            seen.append(ray.get([a.step.remote(i, 150 if k == 1 else -1) for k, a in enumerate(actors)]))
        except ray.exceptions.RayActorError:
            seen.append("died")
    assert seen[:150] == [[i + 1] * 3 for i in range(150)] and seen[150] == "died"
    # A call made before the death was noticed may fail too (Ray, on a loaded machine); after the restart,
    # every call succeeds, on a fresh instance.
    back = next(k for k in range(151, 400) if seen[k] != "died")
    assert seen[back:] == [[i + 1, i - back + 1, i + 1] for i in range(back, 400)]
    # Nothing the survivors did was lost or repeated.
    assert ray.get([a.step.remote(-1, -2) for a in actors]) == [401, 400 - back + 1, 401]
    expect_fallback(ray, "died")
    expect_replayed(ray, 200)


class CrashOnce:
    """Counts its calls; its process dies on the first call that gets ``x == crash_at`` in the session
    (``marker`` says it has: the retry of that call on the restarted actor runs)."""

    def __init__(self, marker):
        self.marker = marker
        self.calls = 0

    def step(self, x, crash_at):
        self.calls += 1
        if x == crash_at and not os.path.exists(self.marker):
            open(self.marker, "x").close()
            os._exit(1)
        return self.calls


class Doubler:
    def double(self, x):
        return 2 * x


def test_an_actor_with_task_retries_dying_mid_loop_runs_the_call_again(ray, tmp_path):
    # Ray: the call in flight when the process dies runs again on the restarted actor (a fresh __init__),
    # and the script never sees the death.  Replay covers the loop before and after it.
    actor = remote(ray, CrashOnce, str(tmp_path / "died"), max_restarts=1, max_task_retries=1)
    seen = [ray.get(actor.step.remote(i, 200)) for i in range(500)]
    assert seen == list(range(1, 201)) + list(range(1, 301))
    expect_fallback(ray, "died")
    expect_replayed(ray, 300)


def test_a_retried_call_whose_actor_died_feeds_the_actor_reading_its_result(ray, tmp_path):
    actor = remote(ray, CrashOnce, str(tmp_path / "died"), max_restarts=1, max_task_retries=1)
    doubler = remote(ray, Doubler)
    seen = [ray.get(doubler.double.remote(actor.step.remote(i, 150))) for i in range(400)]
    assert seen == [2 * c for c in list(range(1, 151)) + list(range(1, 251))]
    expect_fallback(ray, "died")
    expect_replayed(ray, 200)


def test_calls_in_flight_at_a_retried_actors_death_each_run_once_on_the_new_actor(ray, tmp_path):
    actor = remote(ray, CrashOnce, str(tmp_path / "died"), max_restarts=1, max_task_retries=1)
    doubler = remote(ray, Doubler)
    refs = [doubler.double.remote(actor.step.remote(i, 150)) for i in range(400)]     # no get: many in flight
    seen = ray.get(refs)
    # The old actor's results that reached the caller are a prefix in call order (Ray may also run again a
    # call whose reply the death lost: it retries at least once); every later call ran on the new actor, each
    # with a count of its own (Ray does not promise their order after a restart).
    old = next(i for i, v in enumerate(seen) if v != 2 * (i + 1))
    assert old <= 150
    ran_on_new = ray.get(actor.step.remote(-1, -2)) - 1
    later = [v // 2 for v in seen[old:]]
    assert len(set(later)) == len(later) == 400 - old and all(1 <= c <= ran_on_new for c in later)
    assert ran_on_new >= 400 - old


class GatedCrash(CrashOnce):
    """CrashOnce whose fatal call first waits for the test to open ``gate`` (a FIFO) for writing."""

    def __init__(self, marker, gate):
        super().__init__(marker)
        self.gate = gate

    def step(self, x, crash_at):
        if x == crash_at and not os.path.exists(self.marker):
            with open(self.gate) as gate:
                gate.read()
        return super().step(x, crash_at)


def test_a_cancelled_call_of_a_retried_actor_that_dies_is_not_run_again(ray, tmp_path):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    actor = remote(ray, GatedCrash, str(tmp_path / "died"), gate, max_restarts=1, max_task_retries=1)
    doubler = remote(ray, Doubler)
    doubled = []
    for i in range(300):                        # the call with 150 waits at the gate
        step = actor.step.remote(i, 150)
        doubled.append(doubler.double.remote(step))      # (values flow between calls: the loop replays)
        if i == 200:
            cancelled = step
    ray.cancel(cancelled)
    with open(gate, "w") as opened:
        opened.write("go")                                      # then kills the process
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(cancelled)
    outcomes = []
    for ref in doubled:
        try:
            outcomes.append(ray.get(ref))
        except ray.exceptions.TaskCancelledError:
            outcomes.append("cancelled")
    assert outcomes[200] == "cancelled"                         # the call reading it fails as it did
    assert all(isinstance(v, int) and v % 2 == 0 for v in outcomes[:200] + outcomes[201:])


def test_exception_in_iteration_500(ray):
    env = remote(ray, Env, 0)
    ray.get(env.fail_at.remote(500))
    results, errors = [], []
    for i in range(700):
        try:
            results.append(ray.get(env.risky.remote(i)))
        except ValueError as exc:
            errors.append((i, exc))
    assert len(errors) == 1 and errors[0][0] == 499
    exc = errors[0][1]
    assert isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc, ValueError)
    assert "bad step 500" in str(exc)
    assert results == [2 * i + 1 for i in range(700) if i != 499]
    expect_fallback(ray, "raised")
    expect_replayed(ray, 300)


def test_generator_failing_between_its_two_returns(ray):
    env = remote(ray, Env, 0)
    ray.get(env.fail_at.remote(300))
    seen = []
    for i in range(400):
        first, second = env.risky_pair.options(num_returns=2).remote(i)
        try:
            seen.append((ray.get(first), ray.get(second)))
        except ValueError as exc:
            assert isinstance(exc, ray.exceptions.RayTaskError) and "bad step 300" in str(exc)
            seen.append((ray.get(first), "error"))
    assert seen == [(2 * t - 1, float(t)) if t != 300 else (599, "error") for t in range(1, 401)]
    expect_replayed(ray, 200)


def test_exception_propagates_through_a_chain(ray):
    a, b = remote(ray, Env, 0), remote(ray, Policy)
    ray.get(a.fail_at.remote(150))
    seen = []
    for i in range(220):
        x = a.risky.remote(0)
        y = b.echo.remote(x)                       # the error flows a -> b -> driver
        try:
            seen.append(ray.get(y))
        except ValueError as exc:
            assert isinstance(exc, ray.exceptions.RayTaskError)
            seen.append("error")
    assert seen == [t for t in range(1, 150)] + ["error"] + [t for t in range(151, 221)]
    expect_fallback(ray, "raised")


def test_ref_held_for_100_iterations_then_read(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    held = None
    seen = []
    for i in range(400):
        refs = [e.step.remote(i) for e in envs]
        if i == 120:
            held = refs[0]
        seen.append(ray.get(refs))
        if i == 220:
            assert same(ray.get(held), seen[120][0])
    for k in range(2):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(400))))
    # The extra get only reads a value: served off the plan (the held value moved to the dynamic table).
    expect_replayed(ray, 300)


def test_worker_to_worker_value_held_then_read(ray):
    env, policy = remote(ray, Env, 1), remote(ray, Policy)
    held = None
    rewards = []
    for i in range(300):
        act = policy.act.remote(np.array([0.0, float(i)]))      # act flows policy -> env only
        if i == 100:
            held = act
        rewards.append(ray.get(env.step.remote(act))[1])
    local = Policy()
    acts = [local.act(np.array([0.0, float(i)])) for i in range(300)]
    assert ray.get(held) == acts[100]
    assert rewards == [float(i + 1) for i in range(300)]
    # Kept past the plan's buffering, a value only a worker had was fetched into the dynamic table.
    expect_replayed(ray, 250)


def test_training_and_evaluation_phases_alternate(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    policy = remote(ray, Policy)
    seen = []
    for phase in range(4):
        for i in range(150):
            if phase % 2 == 0:
                seen.append(ray.get([e.step.remote(1) for e in envs]))
            else:
                seen.append(ray.get(policy.act.remote(np.array([0.0, 1.0]))))
    local = Policy()
    steps = [local_env_steps(k, [1] * 300) for k in range(2)]
    train = [row for p in (0, 2) for row in seen[p * 150:(p + 1) * 150]]
    for k in range(2):
        assert same([row[k] for row in train], steps[k])
    evals = [row for p in (1, 3) for row in seen[p * 150:(p + 1) * 150]]
    assert evals == [local.act(np.array([0.0, 1.0])) for _ in range(300)]
    if ray.backend_name == "rayreact":
        # Each phase replays, each in a plan of its own or (once a run has ended on the other phase's call) in
        # one plan of both phases' blocks.
        assert len(runs_of_this_test(ray)) >= 2
        expect_replayed(ray, 300)


def test_another_thread_joins_in(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    seen = []
    for i in range(150):
        seen.append(ray.get([e.step.remote(i) for e in envs]))
    box = []
    t = threading.Thread(target=lambda: box.append(ray.get(envs[0].step.remote(150))))
    t.start()
    t.join()
    seen.append([box[0], ray.get(envs[1].step.remote(150))])
    for i in range(151, 250):
        seen.append(ray.get([e.step.remote(i) for e in envs]))
    for k in range(2):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(250))))


def test_nested_refs_are_passed_as_refs(ray):
    env, policy = remote(ray, Env, 0), remote(ray, Policy)
    out = []
    for i in range(120):
        x = env.step.remote(i)
        out.append(ray.get(policy.echo.remote([x]))[0])        # a ref inside a list stays a ref
    assert all(type(r).__name__ == "ObjectRef" for r in out)
    assert same(ray.get(out[-1]), local_env_steps(0, list(range(120)))[-1])
    assert same(ray.get(out[3]), local_env_steps(0, list(range(4)))[-1])     # kept past the plan's buffering


def _backend_module():
    """The ray module as seen inside a worker (rayreact's or Ray's)."""
    import sys
    return sys.modules.get("rayreact") if "rayreact" in sys.modules else sys.modules["ray"]


class Learner:
    """Reads the refs nested in its arguments itself (``ray.get`` inside the call), and keeps some to read later."""

    def __init__(self):
        self.kept = []

    def learn(self, batch, extra=None):
        ray = _backend_module()
        obs, reward, done = ray.get(batch["step"])
        seen = [float(obs[1]), reward, done]
        if extra is not None:
            seen.append(sum(ray.get(list(extra))))
        return seen

    def keep(self, refs):
        self.kept.append(refs[0])          # a borrowed ref, kept after the driver dropped its own
        return len(self.kept)

    def read_kept(self, k):
        return _backend_module().get(self.kept[k])


def test_refs_nested_in_arguments_replay_and_the_callee_reads_them(ray):
    env, learner = remote(ray, Env, 2), remote(ray, Learner)
    seen = []
    for i in range(200):
        step = env.step.remote(i % 4)
        bonus = ray.put(float(i))
        seen.append(ray.get(learner.learn.remote({"step": step}, extra=(bonus, bonus))))
    expected = [[float(o[1]), r, d, 2.0 * i] for i, (o, r, d) in enumerate(local_env_steps(2, [i % 4 for i in range(200)]))]
    assert seen == expected
    expect_replayed(ray, 100)


def test_a_nested_ref_the_callee_keeps_is_read_after_the_driver_dropped_it(ray):
    env, learner = remote(ray, Env, 5), remote(ray, Learner)
    counts = [ray.get(learner.keep.remote([env.step.remote(i)])) for i in range(150)]
    assert counts == list(range(1, 151))
    expected = local_env_steps(5, list(range(150)))
    for k in (0, 40, 120, 149):
        assert same(ray.get(learner.read_kept.remote(k)), expected[k])
    expect_replayed(ray, 50)


def _sum_nested(parts):
    ray = _backend_module()
    return sum(float(np.sum(v)) for v in ray.get(parts["values"])) + parts["offset"]


def test_a_task_reads_refs_nested_in_its_argument(ray):
    env = remote(ray, Env, 1)
    total = _remote_fn(ray, _sum_nested)
    got = []
    for i in range(150):
        obs_ref = env.reset.remote()
        got.append(ray.get(total.remote({"values": [obs_ref, ray.put(np.array([float(i), 1.0]))], "offset": i})))
    assert got == [float(1 + 0 + i + 1) + i for i in range(150)]
    expect_replayed(ray, 50)


def test_nested_refs_kept_by_the_driver_are_read_long_after_without_a_get_in_the_loop(ray):
    env, learner = remote(ray, Env, 4), remote(ray, Learner)
    steps = []
    for i in range(300):
        steps.append(env.step.remote(i % 5))
        learner.keep.remote([steps[-1]])                 # no get in the loop: the values come to the driver later
        if i % 50 == 49:
            assert same(ray.get(steps[i - 40]), local_env_steps(4, [k % 5 for k in range(i - 39)])[-1])
    expected = local_env_steps(4, [k % 5 for k in range(300)])
    assert all(same(v, e) for v, e in zip(ray.get(steps), expected))
    assert same(ray.get(learner.read_kept.remote(299)), expected[299])
    expect_replayed(ray, 100)


class ThreadedLearner(Learner):
    pass


class DyingEnv(Env):
    def step(self, action):
        if self.t == 99:
            os._exit(1)
        return super().step(action)


def test_a_threaded_callee_whose_nested_refs_producer_dies_gets_the_error(ray):
    env = remote(ray, DyingEnv, 0)
    learner = remote(ray, ThreadedLearner, max_concurrency=2)
    seen = []
    with pytest.raises(ray.exceptions.RayError):
        for i in range(200):
            seen.append(ray.get(learner.learn.remote({"step": env.step.remote(1)})))
    assert len(seen) == 99
    assert seen == [[float(o[1]), r, d] for o, r, d in local_env_steps(0, [1] * 99)]
    expect_replayed(ray, 50)


def _wait_then(path, value):
    wait_for_file(path)
    return value


def test_a_nested_ref_passed_on_but_never_read_does_not_hold_replay_back(ray, tmp_path):
    gate = str(tmp_path / "gate")
    slow = _remote_fn(ray, _wait_then).remote(gate, 7)         # runs until the loop is over
    learner = remote(ray, Learner)
    counts = [ray.get(learner.keep.remote([slow])) for _ in range(150)]
    assert counts == list(range(1, 151))
    open(gate, "w").close()
    assert ray.get(learner.read_kept.remote(149)) == 7
    expect_replayed(ray, 100)


def test_a_put_nesting_this_periods_refs_replays_and_the_reader_gets_them(ray):
    env, learner = remote(ray, Env, 6), remote(ray, Learner)
    start = ray.put(0.5)                                 # a ref made before the loop, nested in every put
    seen = []
    for i in range(200):
        batch = ray.put({"step": env.step.remote(i % 4), "i": i})
        seen.append(ray.get(learner.learn.remote(batch, extra=ray.put([start]))))
    expected = [[float(o[1]), r, d] for o, r, d in local_env_steps(6, [i % 4 for i in range(200)])]
    assert [row[:3] for row in seen] == expected
    assert [row[3] for row in seen] == [0.5] * 200
    expect_replayed(ray, 100)


def test_a_ref_nested_in_a_put_is_kept_by_the_callee_after_the_driver_dropped_both(ray):
    env, learner = remote(ray, Env, 7), remote(ray, Learner)
    counts = []
    for i in range(150):
        counts.append(ray.get(learner.keep.remote(ray.put([env.step.remote(i)]))))
    assert counts == list(range(1, 151))
    expected = local_env_steps(7, list(range(150)))
    for k in (0, 60, 149):
        assert same(ray.get(learner.read_kept.remote(k)), expected[k])
    expect_replayed(ray, 50)


def test_the_driver_reads_a_put_nesting_refs_and_gets_through_them(ray):
    env = remote(ray, Env, 8)
    outer = []
    for i in range(150):
        outer.append(ray.put((env.step.remote(i % 3), i)))
        inner, j = ray.get(outer[-1])
        assert j == i
        assert same(ray.get(inner), local_env_steps(8, [k % 3 for k in range(i + 1)])[-1])
    first, _ = ray.get(outer[2])                         # kept past the plan's buffering
    assert same(ray.get(first), local_env_steps(8, [0, 1, 2])[-1])
    expect_replayed(ray, 50)


def test_a_deviation_with_nested_refs_in_flight_loses_nothing(ray):
    env, learner = remote(ray, Env, 3), remote(ray, Learner)
    pending = []
    for i in range(160):
        step = env.step.remote(i % 3)
        pending.append(learner.learn.remote({"step": step}))
        if i == 120:
            ray.get(env.history.remote())            # a call the plan has not: a fallback with values in flight
        if i % 10 == 9:
            ray.get(pending[-5:])
    seen = ray.get(pending)
    assert seen == [[float(o[1]), r, d] for o, r, d in local_env_steps(3, [i % 3 for i in range(160)])]
    expect_replayed(ray, 5)
    expect_fallback(ray, "history")


def test_reactions_may_call_other_actors(ray):
    envs = [remote(ray, Env, i) for i in range(2)]
    relay = remote(ray, Relay, envs[0])
    seen = []
    for i in range(200):
        seen.append(ray.get([relay.forward.remote(i), envs[1].step.remote(i)]))
    assert same([row[0] for row in seen], local_env_steps(0, list(range(200))))
    assert same([row[1] for row in seen], local_env_steps(1, list(range(200))))
    expect_replayed(ray, 100)


class Relay:
    """An actor whose method makes a nested actor call (it stays dynamic inside a replayed reaction)."""

    def __init__(self, target):
        self.target = target

    def forward(self, x):
        return _get(self.target.step.remote(x))


def _get(ref):
    import sys
    module = sys.modules.get("rayreact") if type(ref).__module__.startswith("rayreact") else sys.modules["ray"]
    return module.get(ref)


def test_a_threaded_actor_replays(ray):
    counter = remote(ray, Policy, max_concurrency=4)
    out = [ray.get(counter.act.remote(np.array([0.0, 2.0]))) for _ in range(100)]
    assert out == [1.0 + k for k in range(1, 101)]
    expect_replayed(ray, 50)


class Meeting:
    """A threaded actor whose calls meet in pairs: each waits at a barrier for the other (so replay must run
    them at the same time, as Ray does; one after the other, the barrier breaks)."""

    def __init__(self):
        self.barrier = threading.Barrier(2)
        self.lock = threading.Lock()
        self.met = 0

    def meet(self, x):
        self.barrier.wait(timeout=60)
        with self.lock:
            self.met += 1
        return x * 2


def test_calls_of_a_threaded_actor_that_wait_for_each_other_still_overlap_in_replay(ray):
    meeting = remote(ray, Meeting, max_concurrency=2)
    env = remote(ray, Env, 0)
    out = []
    for i in range(120):
        obs = env.step.remote(i)
        out.append(ray.get([meeting.meet.remote(i), meeting.meet.remote(-i), obs]))
    assert [row[:2] for row in out] == [[2 * i, -2 * i] for i in range(120)]
    assert same([row[2] for row in out], local_env_steps(0, list(range(120))))
    expect_replayed(ray, 60)


class Pairing:
    """An async actor: ``pair`` waits until another call comes to pair with."""

    def __init__(self):
        self.waiting = []

    async def pair(self, x):
        import asyncio
        if self.waiting:
            first, event, box = self.waiting.pop()
            box.append(x)
            event.set()
            return (first, x)
        event, box = asyncio.Event(), []
        self.waiting.append((x, event, box))
        await event.wait()
        return (x, box[0])

    async def double(self, obs):
        return [2 * v for v in obs]


def test_calls_of_an_async_actor_that_wait_for_each_other_still_overlap_in_replay(ray):
    pairing = remote(ray, Pairing)
    out = [ray.get([pairing.pair.remote(i), pairing.pair.remote(-i)]) for i in range(120)]
    # (Ray does not promise which of two concurrent calls of an async actor starts first)
    assert [[sorted(p) for p in row] for row in out] == [[sorted((i, -i))] * 2 for i in range(120)]
    expect_replayed(ray, 60)


def test_a_deviation_while_a_replayed_async_call_waits_for_a_later_call(ray):
    pairing = remote(ray, Pairing)
    for i in range(60):
        assert [sorted(p) for p in ray.get([pairing.pair.remote(i), pairing.pair.remote(-i)])] == [[-i, i]] * 2
    first = pairing.pair.remote(1000)           # the plan's next call: it waits for a partner
    doubled = pairing.double.remote([1, 2])     # not the plan's: replay ends while ``first`` still waits
    second = pairing.pair.remote(2000)          # the partner, a dynamic call
    assert ray.get(doubled) == [2, 4]
    assert [sorted(p) for p in ray.get([first, second])] == [[1000, 2000]] * 2
    expect_replayed(ray, 20)
    expect_fallback(ray, "")


def test_an_async_actor_between_actors_replays_with_the_same_results(ray):
    env = remote(ray, Env, 3)
    pairing = remote(ray, Pairing)
    policy = remote(ray, Policy)
    actions = []
    obs = env.reset.remote()
    for i in range(150):
        obs = env.step.remote(policy.act.remote(pairing.double.remote(obs)))
        actions.append(ray.get(obs))
    expected_env, expected_policy = Env(3), Policy()
    state = expected_env.reset()
    for i in range(150):
        state = expected_env.step(expected_policy.act([2 * v for v in state]))
        assert same(actions[i], state), i
    expect_replayed(ray, 75)


def test_a_queue_between_the_driver_and_itself_replays(ray):
    from conftest import submodule
    queue = submodule(ray, "util.queue").Queue(maxsize=10)
    out = []
    for i in range(150):
        queue.put(i)
        out.append(queue.get(timeout=60))
    assert out == list(range(150))
    assert queue.empty()
    expect_replayed(ray, 50)


def test_worker_process_dies(ray):
    envs = [remote(ray, Env, i) for i in range(3)]
    pid = ray.get(envs[1].pid.remote())
    seen = []
    for i in range(300):
        refs = [e.step.remote(i) for e in envs]
        if i == 150:
            os.kill(pid, signal.SIGKILL)
        row = []
        for r in refs:
            try:
                row.append(ray.get(r))
            except ray.exceptions.RayActorError:
                row.append("dead")
        seen.append(row)
    for k in (0, 2):
        assert same([row[k] for row in seen], local_env_steps(k, list(range(300))))
    column = [row[1] for row in seen]
    first_dead = column.index("dead")
    assert first_dead in (150, 151)
    assert same(column[:first_dead], local_env_steps(1, list(range(first_dead))))
    assert all(v == "dead" for v in column[first_dead:])
    expect_replayed(ray, 100)
    expect_fallback(ray, "died")


class Boxer:
    """Returns values that nest refs it made itself (a put inside the actor)."""

    def box(self, i):
        import sys
        module = sys.modules.get("rayreact") if "rayreact" in sys.modules else sys.modules["ray"]
        return [module.put(i * 10), i]


def test_results_nesting_refs(ray):
    boxer = remote(ray, Boxer)
    boxes = []
    for i in range(150):
        box = ray.get(boxer.box.remote(i))
        assert box[1] == i
        boxes.append(box)
    assert [ray.get(b[0]) for b in boxes] == [i * 10 for i in range(150)]


class Mutator:
    """Returns its own buffer and overwrites it on the next call: results must be snapshots at return."""

    def __init__(self):
        self.buf = np.zeros(3)

    def next(self, i):
        self.buf[:] = i
        return self.buf


def test_results_are_snapshots_at_return(ray):
    mutator, reader = remote(ray, Mutator), remote(ray, Policy)
    held = None
    seen = []
    for i in range(220):
        x = mutator.next.remote(i)                 # flows mutator -> reader only
        if i == 60:
            held = x
        seen.append(ray.get(reader.echo.remote(x)).tolist())
    assert seen == [[float(i)] * 3 for i in range(220)]
    assert ray.get(held).tolist() == [60.0] * 3
    expect_replayed(ray, 20)


# ---------------------------------------------------------------------- task call sites
def _score(weights, seed, bias=0.0):
    """A pure function of its arguments (the tasks below wrap it)."""
    return float(np.dot(weights, np.arange(len(weights)))) * (seed + 1) + bias


def _remote_fn(ray, fn, **options):
    return ray.remote(**options)(fn) if options else ray.remote(fn)


def test_task_fan_out_over_a_put_each_round(ray):
    score = _remote_fn(ray, _score)
    pair = _remote_fn(ray, lambda w, k: (float(w.sum()), k * 2), num_returns=2)
    weights = np.zeros(4)
    seen, expected = [], []
    for i in range(200):
        weights[:] = i * 0.5
        w_ref = ray.put(weights)
        refs = [score.remote(w_ref, s, bias=i) for s in range(3)]
        total, twice = pair.remote(w_ref, i)
        weights[:] = -1.0                    # after the calls: never seen by them
        seen.append(ray.get(refs + [total, twice]))
        w = np.full(4, i * 0.5)
        expected.append([_score(w, s, i) for s in range(3)] + [float(w.sum()), i * 2])
    assert seen == expected
    expect_replayed(ray, 100)


def test_a_round_of_identical_calls_over_a_put_replays_as_a_whole(ray):
    # Within a round the calls alone repeat every call (same function, same put): a plan of that would end
    # at the round's end.  The loop is the round, put to get.
    score = _remote_fn(ray, _score)
    seen, expected = [], []
    for i in range(60):
        w_ref = ray.put(np.full(4, i * 0.5))
        seen.append(ray.get([score.remote(w_ref, s, bias=i) for s in range(8)]))
        expected.append([_score(np.full(4, i * 0.5), s, i) for s in range(8)])
    assert seen == expected
    expect_replayed(ray, 30)
    if ray.backend_name == "rayreact":
        assert not any("expected score" in r or "got a put" in r for r in fallback_reasons(ray)), \
            fallback_reasons(ray)


def test_tasks_and_actor_calls_in_one_round(ray):
    env = remote(ray, Env, 3)
    score = _remote_fn(ray, _score)
    seen, scores = [], []
    for i in range(200):
        obs, s = ray.get([env.step.remote(i), score.remote(np.ones(3) * i, i)])
        seen.append(obs)
        scores.append(s)
    assert same(seen, local_env_steps(3, list(range(200))))
    assert scores == [_score(np.ones(3) * i, i) for i in range(200)]
    expect_replayed(ray, 100)


def _crash_once(i, crash_at, marker):
    """Kills its own worker at ``crash_at``, once (the marker file remembers)."""
    if i == crash_at and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return i * 3


def test_task_worker_killed_mid_call_is_retried(ray, tmp_path):
    step = _remote_fn(ray, _crash_once)
    marker = str(tmp_path / "crashed")
    out = []
    crash_at = None
    for i in range(300):
        if crash_at is None and (periods_replayed(ray) >= 3 if ray.backend_name == "rayreact" else i == 150):
            crash_at = i                 # (on rayreact, a replayed call, however late a loaded machine starts replay)
        at = -10 ** 9 if crash_at is None else crash_at
        out.append(ray.get([step.remote(i, at, marker), step.remote(-i, at, marker)]))
    assert out == [[i * 3, -i * 3] for i in range(300)]
    assert os.path.exists(marker)
    expect_replayed(ray, 100)
    expect_fallback(ray, "died")


def _crash_once_with(i, big, crash_at, marker):
    if i == crash_at and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return float(big[0]) + float(big[-1]) + i


def test_task_worker_killed_mid_call_with_a_large_argument_is_retried(ray, tmp_path):
    # A large literal argument travels in a segment; the retry must rebuild the call from it.
    step = _remote_fn(ray, _crash_once_with)
    marker = str(tmp_path / "crashed")
    big = np.arange(40_000, dtype=np.float64)          # 320 KB: past the inline limit
    out = []
    for i in range(240):
        big[0] = i
        out.append(ray.get(step.remote(i, big, 120, marker)))
    assert out == [i + 39_999.0 + i for i in range(240)]
    assert os.path.exists(marker)
    expect_replayed(ray, 60)


def test_task_without_retries_dying_raises_worker_crashed(ray, tmp_path):
    step = _remote_fn(ray, _crash_once, max_retries=0)
    marker = str(tmp_path / "crashed")
    out = []
    for i in range(300):
        try:
            out.append(ray.get(step.remote(i, 150, marker)))
        except ray.exceptions.WorkerCrashedError:
            out.append("crashed")
    assert out == [i * 3 if i != 150 else "crashed" for i in range(300)]
    expect_replayed(ray, 100)


def _fails_at(i, bad):
    if i == bad:
        raise ValueError(f"bad input {i}")
    return i + 0.5


def test_task_exception_surfaces_and_the_loop_goes_on(ray):
    check = _remote_fn(ray, _fails_at)
    out = []
    for i in range(400):
        try:
            out.append(ray.get(check.remote(i, 250)))
        except ValueError as exc:                       # RayTaskError(ValueError) is a ValueError
            assert isinstance(exc, ray.exceptions.RayTaskError)
            assert "bad input 250" in str(exc)
            out.append("raised")
    assert out == [i + 0.5 if i != 250 else "raised" for i in range(400)]
    expect_replayed(ray, 100)
    expect_fallback(ray, "raised")


def test_chained_tasks_give_the_same_results(ray):
    inc = _remote_fn(ray, lambda x: x + 1)
    double = _remote_fn(ray, lambda x: x * 2)
    out = [ray.get(double.remote(inc.remote(i))) for i in range(150)]
    assert out == [(i + 1) * 2 for i in range(150)]
    expect_replayed(ray, 50)


# ---------------------------------------------------------------------- tasks anywhere in the graph
class Walker:
    """An env-like actor: each step takes the agents' actions and returns the next observation."""

    def __init__(self):
        self.t = 0
        self.seen = []

    def step(self, *actions):
        self.t += 1
        self.seen.append(actions)
        return np.array([float(self.t), float(sum(actions))])

    def history(self):
        return self.seen


def _view(obs, agent, crash_at=-1, marker=""):
    """A task between actors: one agent's share of the observation (kills its worker once at ``crash_at``)."""
    if obs[0] == crash_at and agent == 0 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return obs * (agent + 1)


def _walk(ray, steps, get_each_step, crash_at=-1, marker="", **view_options):
    """env actor -> a task per agent -> the agents' policy actors -> env actor, the driver passing refs only."""
    env = ray.remote(Walker).remote()
    policies = [ray.remote(Policy).remote(0.5 * (k + 1)) for k in range(2)]
    view = _remote_fn(ray, _view, **view_options)
    obs = env.step.remote(0.0, 0.0)
    got = []
    for _ in range(steps):
        actions = [p.act.remote(view.remote(obs, k, crash_at, marker)) for k, p in enumerate(policies)]
        obs = env.step.remote(*actions)
        if get_each_step:
            got.append(ray.get(obs).tolist())
    return got, ray.get(env.history.remote())


def _walk_in_process(steps):
    env, policies = Walker(), [Policy(0.5 * (k + 1)) for k in range(2)]
    obs, got = env.step(0.0, 0.0), []
    for _ in range(steps):
        obs = env.step(*[p.act(_view(obs, k)) for k, p in enumerate(policies)])
        got.append(obs.tolist())
    return got, env.history()


@pytest.mark.parametrize("get_each_step", [True, False])
def test_tasks_between_actors_replay_with_the_same_results(ray, get_each_step):
    got, history = _walk(ray, 150, get_each_step)
    want, want_history = _walk_in_process(150)
    assert history == want_history
    assert got == (want if get_each_step else [])
    expect_replayed(ray, 50)


@pytest.mark.parametrize("get_each_step", [True, False])
def test_a_task_between_actors_whose_worker_dies_is_retried_and_feeds_its_readers(ray, tmp_path, get_each_step):
    marker = str(tmp_path / "crashed")
    got, history = _walk(ray, 200, get_each_step, crash_at=120, marker=marker)
    want, want_history = _walk_in_process(200)
    assert os.path.exists(marker)
    assert history == want_history
    assert got == (want if get_each_step else [])
    expect_replayed(ray, 50)
    if get_each_step:       # (with no get the driver may have made every call before the death shows)
        expect_fallback(ray, "died")


def test_a_task_between_actors_without_retries_fails_its_readers_with_worker_crashed(ray, tmp_path):
    marker = str(tmp_path / "crashed")
    env = ray.remote(Walker).remote()
    policy = ray.remote(Policy).remote()
    view = _remote_fn(ray, _view, max_retries=0)
    obs = env.step.remote(0.0)
    out = []
    for _ in range(200):
        act = policy.act.remote(view.remote(obs, 0, 120, marker))
        try:
            out.append(ray.get(act))
        except ray.exceptions.WorkerCrashedError:
            out.append("crashed")
            act = 0.0
        obs = env.step.remote(act)
    assert out.count("crashed") == 1 and out[119] == "crashed"
    assert ray.get(env.history.remote())[120] == (0.0,)
    expect_replayed(ray, 50)


def test_task_options_change_mid_loop(ray):
    score = _remote_fn(ray, _score)
    out = []
    for i in range(300):
        fn = score.options(name=f"eval-{i}") if i % 100 == 99 else score
        out.append(ray.get(fn.remote(np.ones(2), i)))
    assert out == [_score(np.ones(2), i) for i in range(300)]
    expect_replayed(ray, 50)


def _leaf(x):
    return x * 10


def test_replayed_tasks_may_submit_and_wait_on_tasks(ray):
    leaf = _remote_fn(ray, _leaf)

    def outer(i):
        import sys
        module = sys.modules.get("rayreact") if "rayreact" in sys.modules else sys.modules["ray"]
        return sum(module.get([leaf.remote(i), leaf.remote(i + 1)]))

    outer_remote = _remote_fn(ray, outer)
    out = [ray.get([outer_remote.remote(i), outer_remote.remote(-i)]) for i in range(150)]
    assert out == [[_leaf(i) + _leaf(i + 1), _leaf(-i) + _leaf(-i + 1)] for i in range(150)]
    expect_replayed(ray, 50)


def _sleeper(seconds):
    import time
    time.sleep(seconds)
    return seconds


def test_a_loop_that_cancels_is_never_replayed(ray):
    sleeper, leaf = _remote_fn(ray, _sleeper), _remote_fn(ray, _leaf)
    out = []
    for i in range(20):
        quick = leaf.remote(i)
        doomed = sleeper.remote(20)
        ray.cancel(doomed)
        try:
            out.append(ray.get(doomed))
        except ray.exceptions.TaskCancelledError:
            out.append("cancelled")
        out.append(ray.get(quick))
    if ray.backend_name == "ray":
        # Ray's cancel is best effort: on a loaded machine one may come too late and the task finishes.
        out = ["cancelled" if v == 20 and k % 2 == 0 else v for k, v in enumerate(out)]
    assert out == [v for i in range(20) for v in ("cancelled", _leaf(i))]
    if ray.backend_name == "rayreact":
        assert periods_replayed(ray) == 0


def _marked_sleeper(mark, seconds):
    import time
    if mark:
        open(mark, "w").close()
    for _ in range(int(seconds / 0.05)):
        time.sleep(0.05)        # Ray's cancel interrupts Python code, but a time.sleep only once it returns
    return seconds


def test_cancel_of_a_replayed_task_while_it_runs(ray, tmp_path):
    # A fan-out replays; then a call of the same shape runs long and the script gives up on it.  The fallback
    # must not wait for it to finish: the task is interrupted (TaskCancelledError), as in Ray.
    work = _remote_fn(ray, _marked_sleeper)
    for _ in range(150):
        assert ray.get([work.remote("", 0), work.remote("", 0)]) == [0, 0]
    expect_replayed(ray, 100)
    mark = str(tmp_path / "started")
    slow, other = work.remote(mark, 600), work.remote("", 0)   # past the test timeout
    wait_for_file(mark)
    ray.cancel(slow)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(slow)
    assert ray.get(other) == 0
    expect_fallback(ray, "ray.cancel")
    for _ in range(50):
        assert ray.get([work.remote("", 0), work.remote("", 0)]) == [0, 0]


class _Holder:
    def __init__(self):
        self.log = []

    def step(self, i, mark, gate):
        if mark:
            open(mark, "w").close()
            while not os.path.exists(gate):
                import time
                time.sleep(0.01)
        self.log.append(i)
        return i

    def history(self):
        return list(self.log)


def test_cancel_of_replayed_actor_calls(ray, tmp_path):
    # A loop of two actor calls and a get replays; then a round's first call blocks in its actor, so
    # the second queues behind it, and both are cancelled.  As in Ray, neither is interrupted (both
    # run), ray.get of each raises TaskCancelledError, force=True is refused, and the loop goes on.
    holder = remote(ray, _Holder)
    for i in range(150):
        assert ray.get([holder.step.remote(i, "", ""), holder.step.remote(-i, "", "")]) == [i, -i]
    expect_replayed(ray, 100)
    mark, gate = str(tmp_path / "started"), str(tmp_path / "gate")
    blocked = holder.step.remote(1000, mark, gate)
    queued = holder.step.remote(1001, "", "")
    wait_for_file(mark)
    with pytest.raises(ValueError, match="force=True is not supported for actor tasks"):
        ray.cancel(blocked, force=True)
    ray.cancel(blocked)
    ray.cancel(queued)
    open(gate, "w").close()
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get([blocked, queued])                     # the loop's own get: replay answers it
    for ref in (blocked, queued):
        with pytest.raises(ray.exceptions.TaskCancelledError):
            ray.get(ref, timeout=60)
    assert ray.get(holder.history.remote())[-2:] == [1000, 1001]
    for i in range(50):
        assert ray.get([holder.step.remote(i, "", ""), holder.step.remote(-i, "", "")]) == [i, -i]
    if ray.backend_name == "rayreact":                 # the cancels themselves did not stop the replay
        assert not any("ray.cancel" in reason for reason in fallback_reasons(ray))


def test_a_fresh_remote_function_of_the_same_code_each_round(ray):
    # ray.remote(lambda: ...) in a loop: every round a new function of one code and one name, with its own
    # closure.  Replay must not mistake it for the first round's.
    out = [ray.get(ray.remote(lambda: i * 10).remote()) for i in range(40)]
    assert out == [i * 10 for i in range(40)]


class Gate:
    """Waits, outside Ray, for a file the driver writes later (a signal the script sends by other means)."""

    def __init__(self):
        self.order = []

    def pass_when(self, path, i):
        wait_for_file(path)
        self.order.append(("gated", i))
        return i

    def note(self, i):
        self.order.append(("note", i))
        return i

    def start_then_pass_when(self, started, path, i):
        open(started, "w").close()
        return self.pass_when(path, i)

    def history(self):
        return self.order


def test_a_deviation_while_a_replayed_call_waits_for_the_driver(ray, tmp_path):
    # The in-flight replayed call can only finish after the driver acts *after* the deviating call: falling
    # back must not wait for it (Ray would not), and the calls the script makes next still run after the
    # ones it made before.
    gate, other = remote(ray, Gate), remote(ray, Gate)
    out, notes = [], []
    for i in range(60):
        path = tmp_path / f"gate{i}"
        ref = gate.pass_when.remote(str(path), i)
        note = gate.note.remote(i)                         # queued behind pass_when(i)
        if i == 50:
            assert ray.get(other.note.remote(i)) == i      # the deviation, while pass_when(50) waits
            after = gate.note.remote(1000 + i)             # the same caller's next call to the gated actor
        path.write_text("go")
        out.append(ray.get(ref))
        notes.append(ray.get(note))
    assert out == notes == list(range(60))
    assert ray.get(after) == 1050
    history = ray.get(gate.history.remote())
    assert history[100:105] == [("gated", 50), ("note", 50), ("note", 1050), ("gated", 51), ("note", 51)]
    expect_fallback(ray, "expected")
    expect_replayed(ray, 20)


def test_ctrl_c_during_a_replayed_get(ray, tmp_path):
    # KeyboardInterrupt reaches a script blocked in a get whose call is still running, as in Ray; the call
    # goes on, and its value is still there for the next get.
    gate = remote(ray, Gate)
    opened = tmp_path / "open"
    opened.write_text("go")
    out = [ray.get(gate.start_then_pass_when.remote(str(tmp_path / f"s{i}"), str(opened), i)) for i in range(40)]
    started, late = tmp_path / "s40", tmp_path / "late"
    ref = gate.start_then_pass_when.remote(str(started), str(late), 40)

    # The signal is sent only once the main thread is inside the `pytest.raises` block: sent earlier (during
    # Thread.start, say) the KeyboardInterrupt would escape it and end the whole pytest session.
    inside = threading.Event()

    def interrupt():
        wait_for_file(str(started))
        inside.wait()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        inside.set()
        ray.get(ref)
    assert not late.exists()                     # so the get returned while the call was still waiting
    late.write_text("go")
    out.append(ray.get(ref))
    out += [ray.get(gate.start_then_pass_when.remote(str(tmp_path / f"s{i}"), str(opened), i)) for i in range(41, 60)]
    assert out == list(range(60))
    expect_replayed(ray, 20)


# ---------------------------------------------------------------------- reads off the plan
class Accumulator:
    def __init__(self):
        self.total = 0.0

    def add(self, *xs):
        self.total += sum(xs)
        return self.total


def test_a_look_at_a_result_now_and_then_does_not_leave_replay(ray):
    # The parameter-server shape: refs passed from call to call, an evaluation every 25 iterations.
    acc = ray.remote(Accumulator).remote()
    policies = [ray.remote(Policy).remote(0.5 * (k + 1)) for k in range(2)]
    before = ray.put(np.array([0.0, 2.0]))
    total, looks = acc.add.remote(0.0), []
    for i in range(1, 301):
        total = acc.add.remote(*[p.act.remote(np.array([0.0, float(i)])) for p in policies])
        if i % 25 == 0:
            looks.append(ray.get(total))
            looks.append(ray.wait([total], num_returns=1, timeout=None)[0] == [total])
            looks.append(float(ray.get(before)[1]))       # a value of the dynamic table, mid-loop
    final = ray.get(total)
    policies_in_process, running, want = [Policy(0.5 * (k + 1)) for k in range(2)], 0.0, []
    for i in range(1, 301):
        running += sum(p.act(np.array([0.0, float(i)])) for p in policies_in_process)
        if i % 25 == 0:
            want += [running, True, 2.0]
    assert looks == want and final == running
    expect_replayed(ray, 200)
    if ray.backend_name == "rayreact":
        assert not any("got a get" in r or "got a wait" in r for r in fallback_reasons(ray))
        assert sum(r.get("off_plan_reads", 0) for r in runs_of_this_test(ray)) >= 20


def _maybe_fail(x):
    if x == 13:
        raise ValueError("thirteen")
    return x


def test_an_error_read_off_the_plan_raises_and_the_loop_goes_on(ray):
    acc = ray.remote(Accumulator).remote()
    check = _remote_fn(ray, _maybe_fail)
    looks = {13, 40, 63, 101, 113, 170}                  # no period: each is a read off the plan
    seen = []
    for i in range(200):
        ref = acc.add.remote(check.remote(i % 50))
        if i in looks:
            try:
                seen.append(ray.get(ref))
            except ValueError as exc:
                assert "thirteen" in str(exc)
                seen.append("raised")
    running, want = 0, []
    for i in range(200):
        ok = i % 50 != 13         # a failed dependency: the actor's method does not run, its result is the error
        running += i % 50 if ok else 0
        if i in looks:
            want.append(float(running) if ok else "raised")
    assert seen == want
    expect_replayed(ray, 20)


class Rollout:
    """Pong-PG shaped: a gradient from the model it is given; episodes of varying length."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def gradient(self, model):
        self.n += 1
        steps = int(self.rng.integers(1, 4000))          # work of varying length: completion order varies
        acc = float(np.arange(steps).sum() % 7)
        return model * 0.0 + self.n + acc, steps


def test_waits_in_completion_order_serve_off_the_plan_while_the_calls_replay(ray):
    # The calls repeat, the reads do not: whichever gradient is ready first is taken first.
    actors = [ray.remote(Rollout).remote(k) for k in range(3)]
    model = np.zeros(4)
    totals = []
    for _ in range(60):
        model_ref = ray.put(model)
        pending = [a.gradient.remote(model_ref) for a in actors]
        total = 0.0
        while pending:
            [ready], pending = ray.wait(pending, num_returns=1)
            grad, steps = ray.get(ready)
            total += float(grad.sum())
        model = model + 1e-3 * total
        totals.append(total)
    local = [Rollout(k) for k in range(3)]
    model, want = np.zeros(4), []
    for _ in range(60):
        total = sum(float(local[k].gradient(model)[0].sum()) for k in range(3))
        model = model + 1e-3 * total
        want.append(total)
    assert totals == pytest.approx(want)
    expect_replayed(ray, 20)


class Applier:
    """A parameter server that keeps which gradients it applied, in order."""

    def __init__(self):
        self.applied = []

    def apply(self, gradient):
        self.applied.append(gradient)
        return len(self.applied)

    def log(self):
        return self.applied


class GradientWorker:
    def __init__(self, k):
        self.k, self.calls = k, 0

    def compute(self, version):
        self.calls += 1
        return self.k, self.calls, version


def test_a_loop_in_completion_order_replays_keeps_every_result_and_explain_names_it(ray):
    # The asynchronous parameter server's shape: take one finished gradient, apply it, hand its worker the
    # new version.  Which one is taken is the script's (seeded) choice, so every backend must give the same log.
    ps = ray.remote(Applier).remote()
    learners = [ray.remote(GradientWorker).remote(k) for k in range(3)]
    version = ps.apply.remote(None)
    in_flight = {learner.compute.remote(version): k for k, learner in enumerate(learners)}
    choice = np.random.default_rng(7)
    for _ in range(60):
        refs = list(in_flight)
        ray.wait(refs, num_returns=len(refs))
        taken = refs[int(choice.integers(len(refs)))]
        k = in_flight.pop(taken)
        version = ps.apply.remote(taken)
        in_flight[learners[k].compute.remote(version)] = k
    log = ray.get(ps.log.remote())
    # The same choices made in-process.
    calls, order, want = [1, 1, 1], [0, 1, 2], [None]
    choice = np.random.default_rng(7)
    made = {k: (k, 1, 1) for k in range(3)}
    for _ in range(60):
        k = order.pop(int(choice.integers(len(order))))
        want.append(made[k])
        calls[k] += 1
        made[k] = (k, calls[k], len(want))
        order.append(k)
    assert log == want
    expect_replayed(ray, 20)
    if ray.backend_name == "rayreact":
        said = str(ray.explain(quiet=True))
        assert "a loop in completion order, position" in said and "pool:" in said, said


class BigGradientWorker(GradientWorker):
    def compute(self, version):
        k, calls, version = super().compute(version)
        return np.full(300_000, float(k)), calls, version      # a segment, not an inline value


def _async_ps_loop(ray, ps, learners, in_flight, iterations, seed):
    choice = np.random.default_rng(seed)
    for _ in range(iterations):
        refs = list(in_flight)
        ready, _ = ray.wait(refs, num_returns=1 + int(choice.integers(len(refs))))
        taken = ready[int(choice.integers(len(ready)))]
        k = in_flight.pop(taken)
        in_flight[learners[k].compute.remote(ps.apply.remote(taken))] = k
    return ray.get(ps.log.remote())


def test_a_loop_in_completion_order_over_big_results_hands_them_over_when_it_ends(ray):
    # Which gradient comes first follows timing here: check what must hold whatever the order.
    ps = ray.remote(Applier).remote()
    learners = [ray.remote(BigGradientWorker).remote(k) for k in range(3)]
    in_flight = {learner.compute.remote(ps.apply.remote(None)): k for k, learner in enumerate(learners)}
    log = _async_ps_loop(ray, ps, learners, in_flight, 80, seed=3)
    assert len(log) == 83 and log[:3] == [None, None, None]
    counts = [0, 0, 0]
    for grad, calls, version in log[3:]:
        k = int(grad[0])
        counts[k] += 1
        assert grad.shape == (300_000,) and (grad == k).all() and calls == counts[k]
        assert 1 <= version <= 82
    # The gradients still in flight when the loop ended are the dynamic runtime's now, every one intact.
    for ref, k in in_flight.items():
        grad, calls, _ = ray.get(ref)
        assert (grad == k).all() and calls == counts[k] + 1
    expect_replayed(ray, 20)


def test_a_worker_of_a_loop_in_completion_order_killed_mid_loop_fails_only_its_own_results(ray):
    ps = ray.remote(Applier).remote()
    learners = [ray.remote(GradientWorker).remote(k) for k in range(3)]
    in_flight = {learner.compute.remote(ps.apply.remote(None)): k for k, learner in enumerate(learners)}
    _async_ps_loop(ray, ps, learners, in_flight, 60, seed=5)
    ray.kill(learners[1])
    choice = np.random.default_rng(11)
    outcomes = []
    for _ in range(40):                      # the loop goes on with the two others
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        taken = ready[0]
        k = in_flight.pop(taken)
        if k == 1:
            try:
                outcomes.append(ray.get(taken)[0])       # (it may have finished before the kill)
            except ray.exceptions.RayActorError:
                outcomes.append("died")
            continue
        in_flight[learners[k].compute.remote(ps.apply.remote(taken))] = k
        choice.random()
    assert outcomes in ([1], ["died"])
    log = ray.get(ps.log.remote())
    assert len(log) == 3 + 60 + 39
    calls = {0: 0, 2: 0}
    for k, n, _ in log[3 + 60:]:
        assert k in calls and n > calls[k]
        calls[k] = n
    for ref, k in in_flight.items():
        assert ray.get(ref)[0] == k


def test_a_value_the_run_started_from_is_read_off_the_plan(ray):
    # Two learners taken strictly in turn: a fixed rotation, whose run starts from gradients made before it.
    # Reading one of those (a get, a wait on two) must give its value, not ask a worker that never made it.
    ps = ray.remote(Applier).remote()
    learners = [ray.remote(GradientWorker).remote(k) for k in range(2)]
    in_flight = {learner.compute.remote(ps.apply.remote(None)): k for k, learner in enumerate(learners)}
    for i in range(120):
        refs = list(in_flight)
        ray.wait(refs, num_returns=1 + i % 2)
        taken = refs[0]
        k = in_flight.pop(taken)
        assert ray.get(taken)[0] == k
        in_flight[learners[k].compute.remote(ps.apply.remote(taken))] = k
    log = ray.get(ps.log.remote())
    assert [k for k, _, _ in log[2:]] == [0, 1] * 60
    expect_replayed(ray, 20)


def _count(i):
    return i


class Total:
    def __init__(self):
        self.total = 0

    def add(self, x):
        self.total += x
        return self.total


def test_a_loop_in_completion_order_over_tasks_replays(ray):
    # Whichever of four tasks is taken goes to an actor, and a new task takes its place.
    count = ray.remote(_count)
    total = ray.remote(Total).remote()
    choice = np.random.default_rng(2)
    pending = [count.remote(i) for i in range(4)]
    for i in range(300):
        ready, _ = ray.wait(pending, num_returns=1 + int(choice.integers(len(pending))))
        taken = ready[int(choice.integers(len(ready)))]
        pending.remove(taken)
        total.add.remote(taken)
        pending.append(count.remote(4 + i))
    assert ray.get(total.add.remote(0)) == sum(range(304)) - sum(ray.get(pending))
    expect_replayed(ray, 50)


def test_a_lock_step_loop_that_skips_an_actor_once_keeps_replaying(ray):
    # One iteration leaves an env out: a call on another actor of the class the plan expected.  Its actors
    # may be retried, so no pooled plan is allowed: the fixed one must come back, and every env's steps run
    # in order, once each.
    envs = [ray.remote(max_task_retries=1)(Env).remote(k) for k in range(4)]
    action = 0.0
    for i in range(240):
        stepped = [e for k, e in enumerate(envs) if not (i == 50 and k == 1)]
        results = ray.get([e.step.remote(action) for e in stepped])
        action = float(int(results[0][1]) % 3)
    histories = ray.get([e.history.remote() for e in envs])
    assert [len(h) for h in histories] == [240, 239, 240, 240]
    expect_replayed(ray, 120)


class Squarer:
    def __init__(self, k):
        self.k, self.calls = k, 0

    def square(self, v):
        self.calls += 1
        busy = sum(range((v * 37) % 400))            # uneven work: whichever actor is free varies
        return self.k, self.calls, v * v + busy * 0


def test_an_actor_pool_map_unordered_replays_and_returns_every_result_once(ray):
    from_pool = ray.util.ActorPool([ray.remote(Squarer).remote(k) for k in range(3)])
    # (1,000 values: a loaded machine may record a few hundred before replay is admitted)
    got = list(from_pool.map_unordered(lambda a, v: a.square.remote(v), range(1000)))
    assert sorted(v for _, _, v in got) == [v * v for v in range(1000)]
    for k in range(3):                               # each actor ran its calls once each, in order
        numbers = sorted(n for who, n, _ in got if who == k)
        assert numbers == list(range(1, len(numbers) + 1))
    expect_replayed(ray, 100)


def test_an_uneven_fixed_schedule_over_actors_of_one_class_replays(ray):
    # Looks like completion order at the class level until two of its five-call periods are seen.
    workers = [ray.remote(GradientWorker).remote(k) for k in range(2)]
    schedule = [0, 1, 1, 0, 1]
    got = [ray.get(workers[k].compute.remote(i)) for i in range(80) for k in schedule]
    calls = [0, 0]
    want = []
    for i in range(80):
        for k in schedule:
            calls[k] += 1
            want.append((k, calls[k], i))
    assert got == want
    expect_replayed(ray, 20)


class Sampler:
    def __init__(self):
        self.n = 0

    def sample(self, k):
        self.n += 1
        return [self.n] * k


class Trainer:
    def __init__(self):
        self.steps, self.seen = 0, []

    def train(self, batch):
        self.steps += 1
        self.seen.append(sum(batch))
        return self.steps

    def get_weights(self):
        return np.full(4, float(self.steps))

    def log(self):
        return self.seen


class Explorer:
    def __init__(self, k):
        self.k, self.chunks = k, []

    def explore(self, weights, n):
        self.chunks.append(float(weights[0]) + n)
        return self.k, len(self.chunks)

    def log(self):
        return self.chunks


def test_blocks_of_calls_in_any_order_replay_and_keep_every_result(ray):
    # Ape-X's shape: by (seeded) choice, the learner's step (a sample fed to train), an explorer's chunk from the
    # latest weights, and now and then a look at the weights.  No period repeats; every call is of a block.
    sampler, trainer = ray.remote(Sampler).remote(), ray.remote(Trainer).remote()
    explorers = [ray.remote(Explorer).remote(k) for k in range(3)]
    weights = trainer.get_weights.remote()
    in_flight = {e.explore.remote(weights, 1): ("explore", e) for e in explorers}
    in_flight[trainer.train.remote(sampler.sample.remote(2))] = ("learn", trainer)
    choice = np.random.default_rng(11)
    learned, results = 0, []
    for _ in range(300):
        refs = list(in_flight)
        ray.wait(refs, num_returns=len(refs))
        taken = refs[int(choice.integers(len(refs)))]
        kind, actor = in_flight.pop(taken)
        results.append(ray.get(taken))
        if kind == "learn":
            learned += 1
            if learned % 4 == 0:
                weights = trainer.get_weights.remote()
                ray.wait([weights])
            in_flight[trainer.train.remote(sampler.sample.remote(2))] = ("learn", trainer)
        else:
            in_flight[actor.explore.remote(weights, len(results))] = ("explore", actor)
    ray.wait(list(in_flight), num_returns=len(in_flight))
    logs = ray.get([trainer.log.remote()] + [e.log.remote() for e in explorers])
    # The same choices made in-process.
    local_sampler, local_trainer = Sampler(), Trainer()
    local_explorers = [Explorer(k) for k in range(3)]
    local_weights = local_trainer.get_weights()
    made = {("explore", k): local_explorers[k].explore(local_weights, 1) for k in range(3)}
    made[("learn", None)] = local_trainer.train(local_sampler.sample(2))
    order = [("explore", k) for k in range(3)] + [("learn", None)]
    choice = np.random.default_rng(11)
    learned, want = 0, []
    for _ in range(300):
        key = order.pop(int(choice.integers(len(order))))
        want.append(made.pop(key))
        if key[0] == "learn":
            learned += 1
            if learned % 4 == 0:
                local_weights = local_trainer.get_weights()
            made[key] = local_trainer.train(local_sampler.sample(2))
        else:
            made[key] = local_explorers[key[1]].explore(local_weights, len(want))
        order.append(key)
    assert [tuple(r) if isinstance(r, list) else r for r in results] == [
        tuple(r) if isinstance(r, list) else r for r in want]
    assert logs == [local_trainer.log()] + [e.log() for e in local_explorers]
    expect_replayed(ray, 40)
    if ray.backend_name == "rayreact":
        said = str(ray.explain(quiet=True))
        assert "blocks of calls taken in any order" in said, said


class Maker:
    def __init__(self):
        self.n = 0

    def make(self):
        self.n += 1
        return self.n

    def double(self, x):
        return 2 * x


class Taker:
    def __init__(self):
        self.seen = []

    def take(self, x, k):
        self.seen.append((x, k))
        return len(self.seen)

    def log(self):
        return self.seen


def test_a_result_read_in_its_block_and_passed_to_another_block_replays(ray):
    # Block A makes x and doubles it (x read inside A); block B, taken by a seeded coin, is given the latest x:
    # the driver relays it, so it must have it too.
    maker, taker = ray.remote(Maker).remote(), ray.remote(Taker).remote()
    coin = np.random.default_rng(5)
    x = maker.make.remote()
    doubled = []
    for k in range(300):
        if coin.random() < 0.5:
            x = maker.make.remote()
            doubled.append(ray.get(maker.double.remote(x)))
        else:
            ray.get(taker.take.remote(x, k))
    seen = ray.get(taker.log.remote())
    coin = np.random.default_rng(5)
    n, want_doubled, want_seen = 1, [], []
    for k in range(300):
        if coin.random() < 0.5:
            n += 1
            want_doubled.append(2 * n)
        else:
            want_seen.append((n, k))
    assert doubled == want_doubled and [tuple(s) for s in seen] == want_seen
    expect_replayed(ray, 60)
