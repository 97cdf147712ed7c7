"""The examples give the same results under real Ray, rayreact with replay, and rayreact without.

Each example prints a checksum of everything it computed from remote results
(all randomness is seeded).  We run it three ways, as a user would: ``python
example.py`` (real Ray), ``python -m rayreact run example.py`` (replay on) and
the same with ``RAYREACT_REACTOR=0``, and compare the checksums (Ray's, at ``--quick``, from
``rayreact compare``'s run of the same example where ``RAYREACT_RAY_ANSWERS`` kept it).  With replay on,
``RAYREACT_EXPLAIN=1`` makes rayreact print ``explain()`` at shutdown, so the
test also checks that the example's loop was in fact replayed.
"""

import os
import re
import subprocess
import sys

import pytest

from rayreact.compat import ray_answers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

# At --quick, Ray's answer is the one test_compat.py's compare of the same example got, when
# RAYREACT_RAY_ANSWERS keeps it (CI sets it): Ray is not started again for it.
CASES = {
    "gym": ["gym_throughput.py", "--quick"],
    "marl": ["marl_inference.py", "--quick"],
    "chain": ["marl_chain.py", "--quick"],
    "dqn": ["dqn_blackjack.py", "--rollout-actors", "4", "--steps-per-rollout", "20", "--batch-sizes", "64",
            "--rounds", "20", "--eval-episodes", "50"],
}


def _run(argv, env_extra, via_rayreact):
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable] + (["-m", "rayreact", "run"] if via_rayreact else []) + argv
    done = subprocess.run(cmd, cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checksum = re.findall(r"^checksum: (\S+)$", done.stdout, re.M)
    assert checksum, done.stdout[-2000:]
    return checksum[-1], done.stderr


def _ray_checksum(argv):
    folder = ray_answers.directory()
    answer = folder and ray_answers.load(folder, os.path.join(EXAMPLES, argv[0]), argv[1:])
    if answer and answer["exit_code"] == 0:
        checksum = re.findall(r"^checksum: (\S+)$", answer["stdout"], re.M)
        if checksum:
            return checksum[-1]
    return _run(argv, {}, False)[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_same_result_with_replay_on_off_and_ray(name):
    argv = CASES[name]
    on, explained = _run(argv, {"RAYREACT_REACTOR": "1", "RAYREACT_EXPLAIN": "1"}, True)
    off, _ = _run(argv, {"RAYREACT_REACTOR": "0"}, True)
    ray = _ray_checksum(argv)
    assert on == off == ray
    replayed = re.search(r"(\d+) periods replayed", explained)
    assert replayed and int(replayed.group(1)) > 10, explained[-3000:]
