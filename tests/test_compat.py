"""``rayreact compare`` on every compat script and example: rayreact must do what real Ray does.

Each test runs the script under real Ray (and again while rayreact differs, to tell Ray's own
nondeterminism apart) and under rayreact with the reactor on and off, and asserts that the
traces, stdout and exit status agree.  The deliberately divergent script must be
caught.  These are slow (real Ray starts in each run); select them with
``-k compat`` or deselect with ``-k 'not compare'``.

``RAYREACT_COMPAT_RAY_RUNS`` (default 2) sets the most Ray runs per script.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

from rayreact.compat import ray_answers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPAT_SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "compat_tests", "*.py"))
                        if not os.path.basename(p).startswith("_"))
DIVERGENT_SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "compat_tests", "divergent", "*.py")))
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))
RAY_RUNS = os.environ.get("RAYREACT_COMPAT_RAY_RUNS", "2")
# Examples whose printed figures follow completion order (which gradient or explorer a ray.wait returns
# first): two Ray runs often agree on them by chance, and a faster runtime legitimately differs.  Their
# calls are still compared (as multisets after the wait, as for every such script); their stdout is not.
TIMING_DEPENDENT_OUTPUT = {"param_server_async.py", "apex_replay.py"}

pytestmark = pytest.mark.timeout(3600)


def run_compare(script, tmp_path, *script_args, extra=(), ray_runs=RAY_RUNS, no_reactor=True, env=None):
    summary_path = tmp_path / "summary.json"
    cmd = [sys.executable, "-m", "rayreact", "compare", *(["--no-reactor"] if no_reactor else []), "--ray-runs", ray_runs,
           "--timeout", "900", "--json", str(summary_path), *extra, script, *script_args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3500,
                          env=None if env is None else dict(os.environ, **env))
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, summary


def _name(path):
    return os.path.relpath(path, ROOT)


def test_there_are_enough_compat_scripts():
    assert len(COMPAT_SCRIPTS) >= 20
    assert DIVERGENT_SCRIPTS


@pytest.mark.parametrize("script", COMPAT_SCRIPTS, ids=_name)
def test_compare_compat_script(script, tmp_path):
    status, report, summary = run_compare(script, tmp_path)
    assert status == 0, report
    assert summary is not None and all(not c["diverged"] for c in summary["candidates"]), report
    assert all(c["events"] > 0 for c in summary["candidates"]) or all(r["events"] == 0 for r in summary["ray"]), report


@pytest.mark.parametrize("script", EXAMPLES, ids=_name)
def test_compare_example_quick(script, tmp_path):
    extra = ("--no-stdout",) if os.path.basename(script) in TIMING_DEPENDENT_OUTPUT else ()
    status, report, summary = run_compare(script, tmp_path, "--quick", extra=extra)
    assert status == 0, report


@pytest.mark.parametrize("script", ["examples/marl_chain.py", "compat_tests/rl_rollout_loop.py"])
def test_compare_colocated_with_tasks_in_hosts(script, tmp_path):
    # Co-located and replayed, these loops' task calls run in a host: traced as the user's functions, with
    # the same results as Ray's.
    args = ("--quick",) if script.startswith("examples/") else ()
    status, report, summary = run_compare(os.path.join(ROOT, script), tmp_path, *args, extra=("--colocate",),
                                          no_reactor=False)
    assert status == 0, report
    assert summary is not None and len(summary["candidates"]) == 2, report
    assert all(not c["diverged"] for c in summary["candidates"]), report


@pytest.mark.parametrize("script", DIVERGENT_SCRIPTS, ids=_name)
def test_compare_catches_a_divergent_script(script, tmp_path):
    status, report, summary = run_compare(script, tmp_path)
    assert status == 1, report
    assert "DIVERGED" in report and "first divergence" in report, report
    assert all(c["diverged"] for c in summary["candidates"]), report


def test_compare_of_ray_against_itself_is_equal(tmp_path):
    # The comparison machinery on its own: a script compared with real Ray as the candidate (one run each).
    script = os.path.join(ROOT, "compat_tests", "actor_counter.py")
    answers = tmp_path / "answers"
    answers.mkdir()
    status, report, _ = run_compare(script, tmp_path, extra=("--candidate", "ray"), ray_runs="1", no_reactor=False,
                                    env={ray_answers.ENV_VAR: str(answers)})
    assert status == 0, report
    assert "EQUAL" in report and "speedup" in report, report
    # Ray's answer is kept for tests that need only that (tests/test_reactor_examples.py)
    answer = ray_answers.load(str(answers), script, [])
    assert answer["exit_code"] == 0 and answer["args"] == [] and answer["stdout"].strip()
    assert ray_answers.load(str(answers), script, ["--other"]) is None
