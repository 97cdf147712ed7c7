"""The reactor's visibility and quiet: explain(), DOT/PNG, the Chrome trace, and no CPU while idle.

These are rayreact-only (real Ray has no reactor); each checks something a
user relies on: that ``explain`` names the period, the reactors and the
fallbacks; that ``timeline`` writes a trace with one slice per reaction and
flow arrows along connections; that a replaying script which sleeps leaves its
workers asleep; and that the reactor can be switched off.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import rayreact as ray
from conftest import wait_until
from rayreact.core import context


class Env:
    def __init__(self, seed):
        self.seed = seed
        self.t = 0

    def step(self, action):
        self.t += 1
        return np.array([self.seed, self.t + float(action)])

    def pid(self):
        return os.getpid()


class Policy:
    def act(self, obs):
        return float(obs[1]) * 0.5


@pytest.fixture(scope="module")
def session():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture
def fresh(session):
    context.current.reactor.reset()
    return session


def chain(rounds):
    env, policy = ray.remote(Env).remote(0), ray.remote(Policy).remote()
    obs = env.step.remote(0)
    out = []
    for _ in range(rounds):
        act = policy.act.remote(obs)
        obs = env.step.remote(act)
        out.append(ray.get(obs))
    return env, policy, out


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_replaying_script_uses_no_cpu(fresh):
    envs = [ray.remote(Env).remote(i) for i in range(3)]
    pids = ray.get([e.pid.remote() for e in envs])
    for i in range(200):
        ray.get([e.step.remote(i) for e in envs])
    reactor = context.current.reactor
    assert reactor.state == "REPLAYING"
    before = [_cpu_seconds(p) for p in pids]
    time.sleep(2.0)
    after = [_cpu_seconds(p) for p in pids]
    used = [b - a for a, b in zip(before, after)]
    assert all(u <= 0.05 for u in used), f"workers used {used} s of CPU while the script slept for 2 s"
    # And they wake up again: the loop carries on, still replaying.
    out = [ray.get([e.step.remote(i) for e in envs]) for i in range(200, 220)]
    assert [o[0][1] for o in out] == [2.0 * i + 1 for i in range(200, 220)]
    assert reactor.state == "REPLAYING"


def test_explain_names_period_reactors_and_fallbacks(fresh, capsys):
    env, policy, out = chain(120)
    ray.get(env.step.remote(1))                            # a deviation: falls back
    text = str(ray.explain())
    printed = capsys.readouterr().out
    assert "period of 3 events" in printed and printed.strip() == text.strip()
    assert "Env" in text and "Policy" in text and "worker-to-worker" in text and "lag 1" in text
    assert "periods replayed" in text and "fallbacks to dynamic mode" in text and "got a call of step" in text
    e = ray.explain(quiet=True)
    assert e.plan.period == 3 and e.periods_replayed >= 100
    assert capsys.readouterr().out == ""


def test_explain_writes_dot_and_png(fresh, tmp_path):
    chain(60)
    dot, png = tmp_path / "plan.dot", tmp_path / "plan.png"
    ray.explain(dot=str(dot), png=str(png), quiet=True)
    assert dot.read_text().startswith("digraph plan {")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ray.explain(str(tmp_path / "again.dot"), quiet=True)
    assert (tmp_path / "again.dot").exists()


def test_timeline_has_reactions_and_flows(fresh, tmp_path):
    chain(80)
    path = tmp_path / "trace.json"
    ray.timeline(str(path))
    events = json.loads(path.read_text())
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "reaction"]
    names = {e["name"] for e in slices}
    assert {"Env.step", "Policy.act"} <= names
    assert len([e for e in slices if e["name"] == "Policy.act"]) >= 60
    starts = {e["id"] for e in events if e["ph"] == "s"}
    ends = {e["id"] for e in events if e["ph"] == "f"}
    assert starts and starts == ends
    for e in slices:
        assert e["dur"] > 0 and e["pid"] == e["tid"]


class Stepper:
    def step(self, a, b=0):
        return a + b

    def other(self):
        return "other"


def _replay_a_stepping_loop(rounds=60):
    stepper = ray.remote(Stepper).remote()
    for i in range(rounds):
        assert ray.get(stepper.step.remote(i)) == i
    assert context.current.reactor.state == "REPLAYING"
    return stepper


def _last_fallback():
    return ray.explain(quiet=True).fallbacks[-1][1]


@pytest.mark.parametrize("deviation, named", [
    (lambda s, other: s.step.remote(1, 2), "step with 2 positional arguments (the plan's has 1)"),
    (lambda s, other: s.step.remote(1, b=2), "step with keyword arguments ['b'] (the plan's has [])"),
    (lambda s, other: s.step.options(num_returns=2).remote((1,), (2,)), "step with num_returns=2 (the plan's has 1)"),
    (lambda s, other: other.step.remote(1), "step on another actor"),
], ids=["arity", "keywords", "num_returns", "actor"])
def test_a_guard_names_how_a_call_differs_from_the_plan(fresh, deviation, named):
    other = ray.remote(Stepper).remote()        # made before the loop: a new actor would be a deviation itself
    stepper = _replay_a_stepping_loop()
    ray.get(deviation(stepper, other))
    assert named in _last_fallback()


def test_a_get_off_the_plan_is_served_and_does_not_move_the_plan(fresh):
    extra = ray.put(3)
    stepper = _replay_a_stepping_loop()
    before = len(ray.explain(quiet=True).fallbacks)
    # A get only reads values: served off the plan, replay goes on.
    assert ray.get([stepper.step.remote(1), extra]) == [1, 3]
    assert context.current.reactor.state == "REPLAYING" and len(ray.explain(quiet=True).fallbacks) == before
    # It did not take the plan's get; the next call moves past that read, and replay goes on.
    assert ray.get(stepper.step.remote(2)) == 2
    assert context.current.reactor.state == "REPLAYING" and len(ray.explain(quiet=True).fallbacks) == before
    # A call the plan does not have still deviates, and is named.
    assert ray.get(stepper.other.remote()) == "other"
    assert "expected Stepper.step, got a call of other" in _last_fallback()


class Pid:
    def pid(self):
        return os.getpid()

    def step(self, i):
        return i


def test_explain_after_a_replayed_actor_dies(fresh):
    victim = ray.remote(Pid).remote()
    pid = ray.get(victim.pid.remote())
    for i in range(60):
        assert ray.get(victim.step.remote(i)) == i
    reactor = context.current.reactor
    assert reactor.state == "REPLAYING"
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 60
    with pytest.raises(ray.exceptions.RayActorError):
        while time.time() < deadline:          # replayed calls, until one meets the death
            ray.get(victim.step.remote(0))
    # The run ended when the death reached the script, not at its next call.
    assert reactor.state != "REPLAYING"
    assert f"the worker of actor Pid (pid {pid}) died" in ray.explain(quiet=True).fallbacks[-1][1]
    wait_until(lambda: "handing its values over" not in str(ray.explain(quiet=True)))


def test_explain_reports_the_fraction_of_calls_replayed(fresh, capsys):
    before = ray.explain(quiet=True)
    chain(150)
    after = ray.explain(quiet=True)
    events = after.events - before.events
    replayed = after.replayed_events - before.replayed_events
    assert events == 3 + 150 * 3                       # two actors, the first step, then act, step, get a round
    assert 0.9 * events <= replayed < events           # all but the warm-up replayed
    assert f"{after.events} driver API events so far, {after.replayed_events} of them replayed (" in str(after)


class Server:
    def __init__(self):
        self.weights = np.zeros(3)

    def apply(self, *grads):
        self.weights = self.weights - 0.1 * np.sum(grads, axis=0)
        return self.weights


class Learner:
    def __init__(self, seed):
        self.target = np.arange(3.0) + seed

    def gradient(self, weights):
        return weights - self.target


def test_a_loop_without_gets_replays(fresh):
    """Refs flow from call to call and only the last result is read: no barrier marks the period."""
    # (a replay starts only once the previous run has handed its values over)
    wait_until(lambda: "handing its values over" not in str(ray.explain(quiet=True)))
    server = ray.remote(Server).remote()
    learners = [ray.remote(Learner).remote(i) for i in range(3)]
    weights = server.apply.remote(np.zeros(3))
    before = ray.explain(quiet=True).periods_replayed
    for _ in range(60):
        weights = server.apply.remote(*[learner.gradient.remote(weights) for learner in learners])
    final = ray.get(weights)
    expected, targets = -0.1 * np.zeros(3), [np.arange(3.0) + i for i in range(3)]
    for _ in range(60):
        expected = expected - 0.1 * np.sum([expected - t for t in targets], axis=0)
    assert np.allclose(final, expected)
    assert ray.explain(quiet=True).periods_replayed - before >= 40


class Slow:
    def step(self, x):
        time.sleep(0.15)            # each call far longer than what replay could save on it
        return x + 1


def test_a_loop_of_slow_calls_stays_dynamic_and_explain_says_why(fresh):
    slow = ray.remote(Slow).remote()
    before = ray.explain(quiet=True)
    x = 0
    for _ in range(8):
        x = ray.get(slow.step.remote(x))
    after = ray.explain(quiet=True)
    assert x == 8
    assert after.periods_replayed == before.periods_replayed
    assert "calls of 100 ms or more each: replay would save under 0.1% of the loop's time" in str(after)


def test_run_explain_prints_the_report(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        "import ray\n"
        "ray.init(num_cpus=2)\n"
        "@ray.remote\n"
        "class Counter:\n"
        "    def __init__(self):\n"
        "        self.n = 0\n"
        "    def add(self, k):\n"
        "        self.n += k\n"
        "        return self.n\n"
        "c = Counter.remote()\n"
        "print('total', [ray.get(c.add.remote(1)) for _ in range(100)][-1])\n"
        "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "RAYREACT_EXPLAIN"}
    done = subprocess.run([sys.executable, "-m", "rayreact", "run", "--explain", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "total 100" in done.stdout
    first = next(line for line in done.stderr.splitlines() if line.startswith("rayreact reactor:"))
    replayed = int(first.split(" of them replayed")[0].rsplit(" ", 1)[1])
    assert replayed >= 150, first                      # of 201 events: 100 calls and 100 gets after init


def test_reactor_off():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, _reactor=False)
    try:
        assert context.current.reactor is None
        e = ray.explain(quiet=True)
        assert "off" in str(e)
        ref = ray.remote(Policy).remote().act.remote(np.array([0.0, 4.0]))
        assert ray.get(ref) == 2.0
    finally:
        ray.shutdown()


def test_reactor_off_by_environment(monkeypatch):
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv("RAYREACT_REACTOR", "0")
    ray.init(num_cpus=2)
    try:
        assert context.current.reactor is None
    finally:
        ray.shutdown()
