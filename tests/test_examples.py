"""Every example runs unmodified (``import ray``) in quick mode on rayreact.

Each script runs in a fresh process as ``python -m rayreact run script.py``. We
check that it exits 0, prints its result and reports the backend it ran on, and
that a deterministic example says so.  The envs in gym/atari can also be stepped
without Ray at all (``--serial``, or ``--spread N`` plain processes), which gives a
runtime-free reference for their checksums.

Real Ray runs every example too, in ``test_compat.py``: ``rayreact compare``
runs it under Ray (twice where rayreact differs) and under rayreact, and fails unless the exit status
and every stdout line Ray's runs agree on (the checksum of a deterministic
example among them) are the same.
"""

import functools
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # the benchmarks package knows how to launch a script per backend

from benchmarks import backends  # noqa: E402

EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples")
DETERMINISTIC = ["gym_throughput", "atari_throughput", "dqn_blackjack", "marl_inference", "marl_chain", "pong_pg",
                 "param_server_sync", "vectorized_rollout_tasks"]
NONDETERMINISTIC = ["param_server_async", "apex_replay"]
EXAMPLES = DETERMINISTIC + NONDETERMINISTIC
BACKENDS = {"ray": backends.RAY, "rayreact": backends.RAYREACT, "serial": backends.SERIAL}
RUN_TIMEOUT_S = 280


def test_every_example_file_is_covered():
    on_disk = sorted(f[:-3] for f in os.listdir(EXAMPLES_DIR) if f.endswith(".py") and not f.startswith("_"))
    assert on_disk == sorted(EXAMPLES)


@functools.lru_cache(maxsize=None)
def run_example(name, backend_name, tmp_root, *extra):
    """Run one example once per session; returns (returncode, output, report or None)."""
    backend = BACKENDS[backend_name]
    report_path = os.path.join(tmp_root, f"{name}-{backend_name}{'-'.join(extra)}.json")
    command = backend.command(os.path.join(EXAMPLES_DIR, f"{name}.py"), ["--quick", *extra, "--report", report_path])
    proc = subprocess.run(command, cwd=REPO_ROOT, env=backend.environment(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    output = proc.stdout + proc.stderr
    report = None
    if proc.returncode == 0 and os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    return proc.returncode, output, report


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("examples"))


@pytest.mark.parametrize("backend_name", ["rayreact"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_and_prints_result(name, backend_name, tmp_root):
    returncode, output, report = run_example(name, backend_name, tmp_root)
    assert returncode == 0, f"{name} failed under {backend_name}:\n{output[-3000:]}"
    lines = output.splitlines()
    assert any(line.startswith("result: ") for line in lines), output[-2000:]
    assert any(line.startswith("throughput: ") for line in lines), output[-2000:]
    assert report is not None and report["example"] == name
    assert report["backend"] == backend_name  # the script really ran on the backend we asked for
    if name in DETERMINISTIC:
        assert report["deterministic"] is True
        assert f"checksum: {report['checksum']}" in lines


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("name", ["gym_throughput", "atari_throughput"])
def test_env_stepping_matches_a_run_without_ray(name, tmp_root):
    returncode, output, serial = run_example(name, "serial", tmp_root, "--serial")
    assert returncode == 0, output[-3000:]
    returncode, output, report = run_example(name, "rayreact", tmp_root)
    assert returncode == 0, f"{name} failed under rayreact:\n{output[-3000:]}"
    assert report["checksum"] == serial["checksum"]
    # The benchmarks' floor spread over the cores steps the same envs in plain processes: the same results.
    returncode, output, spread = run_example(name, "serial", tmp_root, "--spread", "2")
    assert returncode == 0, output[-3000:]
    assert spread["backend"] == "spread over 2" and spread["checksum"] == serial["checksum"]


def test_pong_policy_gradient_matches_finite_differences():
    """pong_pg learns only if its hand-written backprop is right: check it against numerical derivatives."""
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("pong_pg", os.path.join(EXAMPLES_DIR, "pong_pg.py"))
    pong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pong)  # defines functions only: main() runs under __main__
    rng = np.random.default_rng(0)
    model = {k: v.astype(np.float64) for k, v in pong.new_model(hidden=6, seed=1).items()}
    model["W1"] = rng.standard_normal((6, pong.INPUT)) * 0.05
    xs = (rng.random((5, pong.INPUT)) < 0.02).astype(np.float64) - (rng.random((5, pong.INPUT)) < 0.02)
    weights_per_step = rng.standard_normal(5)

    def objective(m):  # sum_t w_t * logit_t, whose gradient policy_backward computes
        return sum(w * float(m["W2"] @ np.maximum(m["W1"] @ x, 0.0)) for w, x in zip(weights_per_step, xs))

    hs = np.stack([pong.policy_forward(model, x)[1] for x in xs])
    analytic = pong.policy_backward(model, xs, hs, weights_per_step)
    eps = 1e-6
    for key, index in [("W2", (2,)), ("W2", (5,)), ("W1", (1, int(np.flatnonzero(xs[0])[0]))),
                       ("W1", (4, int(np.flatnonzero(xs[3])[-1])))]:
        bumped = {k: v.copy() for k, v in model.items()}
        bumped[key][index] += eps
        numeric = (objective(bumped) - objective(model)) / eps
        assert analytic[key][index] == pytest.approx(numeric, rel=1e-4, abs=1e-7), (key, index)
