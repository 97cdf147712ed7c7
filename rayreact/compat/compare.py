"""``rayreact compare script.py [args]``: run a script under real Ray and under rayreact, diff the traces.

Each run is a fresh subprocess with ``PYTHONHASHSEED`` fixed and tracing on:

* real Ray, traced by :mod:`rayreact.compat.ray_tracer`: once, and again (up to ``--ray-runs``
  times, default 2) while a rayreact run differs from Ray's so far; what differs between Ray's
  runs is Ray's own nondeterminism and is not held against rayreact (see :mod:`rayreact.compat.diff`);
* rayreact with the reactor on (``rayreact run``, ``RAYREACT_TRACE`` set), and with
  ``--no-reactor`` also with it off (``RAYREACT_REACTOR=0``), and with ``--colocate`` also with
  actors sharing host processes (``RAYREACT_COLOCATE=1``: core.colocation).

The report gives each run's wall time and exit status, the speedup over Ray, and
per rayreact run either EQUAL or the first divergence with both sides' events.
Exit status: 0 all equal, 1 a divergence, 2 the comparison could not be made
(a run timed out, or Ray itself failed to produce a trace).  With ``RAYREACT_RAY_ANSWERS`` set, the
first Ray run's output is kept there for tests that only need Ray's answer
(:mod:`rayreact.compat.ray_answers`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from rayreact.compat import diff, ray_answers
from rayreact.core import trace


@dataclass
class RunResult:
    label: str
    trace_path: str
    stdout: str
    stderr: str
    exit_code: int | None  # None: timed out
    wall_s: float

    @property
    def timed_out(self):
        return self.exit_code is None


def build_parser():
    p = argparse.ArgumentParser(prog="rayreact compare",
                                description="Run a Ray script under real Ray and under rayreact and compare what ran.")
    p.add_argument("--no-reactor", action="store_true",
                   help="also run rayreact with the reactor off (RAYREACT_REACTOR=0)")
    p.add_argument("--colocate", action="store_true",
                   help="also run rayreact with actors sharing host processes (RAYREACT_COLOCATE=1)")
    p.add_argument("--ray-runs", type=int, default=2,
                   help="most runs under real Ray: one, and more while a candidate differs; differences between them "
                        "are Ray's own nondeterminism (default 2)")
    p.add_argument("--seed", default="0", help="PYTHONHASHSEED of every run (default 0)")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed per run (default 600)")
    p.add_argument("--rayreact-trace", choices=["auto", "native", "wrap"], default="auto",
                   help="how rayreact records: its core (native), the wrapper used for Ray (wrap), or native "
                        "where the core supports it (auto, the default)")
    p.add_argument("--candidate", choices=["rayreact", "ray"], default="rayreact",
                   help="what to compare against Ray (ray: Ray against itself, to check a script)")
    p.add_argument("--keep", metavar="DIR", help="keep traces and outputs in DIR")
    p.add_argument("--json", metavar="PATH", help="also write a machine-readable summary to PATH")
    p.add_argument("--no-stdout", action="store_true", help="do not compare the scripts' stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the verdict lines")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return p


def _env(seed, extra=None, drop=()):
    env = dict(os.environ)
    for name in (trace.ENV_VAR, "RAY_ADDRESS", "RAYREACT_RAY_ALIAS", "RAYREACT_ALIAS_RAY", "RAYREACT_WORKER_SETUP",
                 *drop):
        env.pop(name, None)
    env["PYTHONHASHSEED"] = str(seed)
    env.update(extra or {})
    return env


def _run(label, cmd, env, trace_path, timeout, cwd):
    """Run one traced script; on timeout kill its whole process group (Ray's daemons included)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        code = None
    return RunResult(label, trace_path, out, err, code, time.perf_counter() - start)


def ray_command(trace_path, script, args):
    return [sys.executable, "-m", "rayreact.compat.run_traced", "--backend", "ray", "--trace", trace_path,
            script, *args]


def rayreact_command(trace_path, script, args, mode):
    if mode == "wrap":
        return [sys.executable, "-m", "rayreact.compat.run_traced", "--backend", "rayreact", "--trace",
                trace_path, script, *args]
    return [sys.executable, "-m", "rayreact", "run", script, *args]


def native_tracing_available():
    """Whether rayreact's core writes trace events itself (its workers' ``core.tracing`` hook)."""
    import importlib.util

    try:
        return importlib.util.find_spec("rayreact.core.tracing") is not None
    except (ImportError, ValueError):
        return False


def run_ray(ns, workdir, ray_results):
    """One more traced run of the script under real Ray, appended to ``ray_results``; the first is kept as
    Ray's answer where ``RAYREACT_RAY_ANSWERS`` says so."""
    script = os.path.abspath(ns.script)
    path = os.path.join(workdir, f"ray-{len(ray_results) + 1}.jsonl")
    result = _run(f"ray run {len(ray_results) + 1}", ray_command(path, script, ns.args), _env(ns.seed), path,
                  ns.timeout, os.getcwd())
    ray_results.append(result)
    answers = ray_answers.directory()
    if answers and len(ray_results) == 1 and result.exit_code is not None:
        try:
            ray_answers.store(answers, script, ns.args, result.stdout, result.exit_code)
        except OSError as exc:
            print(f"rayreact compare: not keeping Ray's answer in {answers}: {exc}", file=sys.stderr)


def run_candidates(ns, workdir):
    """Each candidate configuration once: rayreact with the reactor on (and off with ``--no-reactor``,
    co-located with ``--colocate``)."""
    script = os.path.abspath(ns.script)
    if ns.rayreact_trace == "auto":
        ns.rayreact_trace = "native" if native_tracing_available() else "wrap"
    configs = [("rayreact (reactor on)", {})]
    if ns.no_reactor:
        configs.append(("rayreact (reactor off)", {"RAYREACT_REACTOR": "0"}))
    if ns.colocate:
        configs.append(("rayreact (co-located)", {"RAYREACT_COLOCATE": "1"}))
    candidates = []
    for i, (label, extra) in enumerate(configs):
        path = os.path.join(workdir, f"rayreact-{i + 1}.jsonl")
        if ns.candidate == "ray":
            label = label.replace("rayreact", "ray as candidate")
            cmd, env = ray_command(path, script, ns.args), _env(ns.seed, extra)
        else:
            cmd = rayreact_command(path, script, ns.args, ns.rayreact_trace)
            env = _env(ns.seed, {**extra, trace.ENV_VAR: path} if ns.rayreact_trace == "native" else extra)
        candidates.append(_run(label, cmd, env, path, ns.timeout, os.getcwd()))
    return candidates


def compare_all(ns, ray_results, candidates):
    """Each candidate's comparison against the Ray runs so far (None for one that timed out)."""
    ray_summaries = [diff.summarize(trace.load(r.trace_path)) for r in ray_results]
    return [None if cand.timed_out else diff.compare_runs(
        ray_summaries, diff.summarize(trace.load(cand.trace_path)),
        None if ns.no_stdout else [r.stdout for r in ray_results],
        None if ns.no_stdout else cand.stdout,
        [r.exit_code for r in ray_results], cand.exit_code) for cand in candidates]


def _ray_failed(ray_results):
    return any(r.timed_out or (r.exit_code != 0 and not trace.load(r.trace_path)) for r in ray_results)


def _tail(text, n=15):
    lines = text.rstrip().splitlines()
    return lines[-n:]


def _units_line(comparison):
    counts = comparison.counts()
    by_level = {}
    for v in comparison.verdicts:
        if v.status == "equal":
            by_level[v.projection] = by_level.get(v.projection, 0) + 1
    levels = ", ".join(f"{level} {n}" for level, n in sorted(by_level.items()))
    actors = sum(1 for v in comparison.verdicts if v.unit.startswith("actor "))
    tasks = sum(1 for v in comparison.verdicts if v.unit.startswith("task "))
    return (f"{actors} actor(s), {tasks} task function(s); equal {counts.get('equal', 0)}"
            + (f" ({levels})" if levels else ""))


def report(ns, ray_results, candidates, comparisons, out=sys.stdout):
    """Print the human-readable report; return the exit status."""
    def say(line=""):
        print(line, file=out)

    say(f"rayreact compare: {ns.script} {' '.join(ns.args)}".rstrip())
    ray_time = min(r.wall_s for r in ray_results)
    for r in ray_results + candidates:
        status = "timed out" if r.timed_out else f"exit {r.exit_code}"
        n_calls = _calls(trace.load(r.trace_path))    # executed calls: wait markers are not counted
        speed = ""
        if r in candidates and not r.timed_out and r.wall_s > 0:
            speed = f"  speedup {ray_time / r.wall_s:.2f}x"
        say(f"  {r.label:<26} {r.wall_s:8.2f} s  {status:<9} {n_calls:6d} calls{speed}")

    broken = [r for r in ray_results if r.timed_out or (r.exit_code != 0 and not trace.load(r.trace_path))]
    if broken:
        for r in broken:
            say(f"cannot compare: {r.label} {'timed out' if r.timed_out else 'failed with no trace'}")
            for line in _tail(r.stderr):
                say(f"    {line}")
        return 2

    status = 0
    for cand, comparison in zip(candidates, comparisons):
        say()
        if cand.timed_out:
            say(f"{cand.label}: TIMED OUT after {cand.wall_s:.0f} s")
            status = max(status, 2)
            continue
        verdict = "DIVERGED" if comparison.diverged else "EQUAL"
        say(f"{cand.label}: {verdict}")
        say(f"  {_units_line(comparison)}; stdout {comparison.stdout_status}")
        for line in comparison.exit_detail:
            say(f"  {line}")
        if comparison.diverged:
            status = max(status, 1)
            first = comparison.first_divergence()
            if first is not None:
                say(f"  first divergence: {first.unit} ({first.status}"
                    + (f", compared as {first.projection}" if first.projection else "") + ")")
                for line in first.detail:
                    say(f"    {line}")
                others = [v.unit for v in comparison.verdicts
                          if v.status in ("diverged", "missing", "extra") and v is not first]
                if others and not ns.quiet:
                    say(f"  also diverged: {', '.join(others[:10])}" + (" ..." if len(others) > 10 else ""))
            if comparison.stdout_status == "diverged":
                for line in comparison.stdout_detail:
                    say(f"    {line}")
            if cand.exit_code != 0 and not ns.quiet:
                say("  stderr (tail):")
                for line in _tail(cand.stderr):
                    say(f"    {line}")
        if ns.quiet:
            continue
        for v in comparison.verdicts:
            if v.status == "warning":
                say(f"  warning: {v.unit}: {v.detail[0]}")
        nondet = [v for v in comparison.verdicts if v.status == "nondeterministic"]
        if nondet:
            say("  nondeterministic under Ray itself (not compared): "
                + ", ".join(f"{v.unit} ({v.detail[0]})" for v in nondet[:8]) + (" ..." if len(nondet) > 8 else ""))
        if comparison.waits_seen:
            say("  note: the script calls wait() with refs still pending; actors' calls after it are compared as a multiset")
        if comparison.stdout_status != "diverged":
            for line in comparison.stdout_detail:
                say(f"  stdout: {line}")
    return status


def _calls(events):
    """Executed calls in a trace (``wait`` markers are not calls)."""
    return sum(1 for e in events if e.get("kind") != "wait")


def summary_json(ns, ray_results, candidates, comparisons, status):
    ray_time = min(r.wall_s for r in ray_results)
    return {
        "script": ns.script,
        "args": ns.args,
        "status": status,
        "ray": [{"label": r.label, "wall_s": r.wall_s, "exit_code": r.exit_code,
                 "events": _calls(trace.load(r.trace_path))} for r in ray_results],
        "candidates": [{
            "label": c.label, "wall_s": c.wall_s, "exit_code": c.exit_code,
            "events": _calls(trace.load(c.trace_path)),
            "speedup": (ray_time / c.wall_s) if c.wall_s and not c.timed_out else None,
            "diverged": comp.diverged if comp is not None else None,
            "units": dict(comp.counts()) if comp is not None else {},
            "stdout": comp.stdout_status if comp is not None else None,
            "first_divergence": (comp.first_divergence().detail if comp is not None and comp.first_divergence()
                                 else None),
        } for c, comp in zip(candidates, comparisons)],
    }


def main(argv=None):
    ns = build_parser().parse_args(argv)
    if ns.ray_runs < 1:
        raise SystemExit("--ray-runs must be at least 1")
    workdir = os.path.abspath(ns.keep) if ns.keep else tempfile.mkdtemp(prefix="rayreact-compare-")
    os.makedirs(workdir, exist_ok=True)
    for name in os.listdir(workdir):
        if name.endswith(".jsonl"):
            os.remove(os.path.join(workdir, name))
    try:
        # Ray runs beyond the first are made only while a candidate differs from those so far: another run can
        # only show more of Ray's own nondeterminism, which relaxes the comparison (a unit or stdout line Ray's
        # runs disagree on is not held against the candidate); it never turns a match into a divergence.
        ray_results = []
        run_ray(ns, workdir, ray_results)
        candidates = run_candidates(ns, workdir)
        comparisons = compare_all(ns, ray_results, candidates)
        while (len(ray_results) < ns.ray_runs and not _ray_failed(ray_results)
               and any(c is not None and c.diverged for c in comparisons)):
            run_ray(ns, workdir, ray_results)
            comparisons = compare_all(ns, ray_results, candidates)
        status = report(ns, ray_results, candidates, comparisons)
        if ns.keep:
            for r in ray_results + candidates:
                stem = os.path.splitext(r.trace_path)[0]
                with open(stem + ".stdout", "w") as f:
                    f.write(r.stdout)
                with open(stem + ".stderr", "w") as f:
                    f.write(r.stderr)
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump(summary_json(ns, ray_results, candidates, comparisons, status), f, indent=2)
        return status
    finally:
        if not ns.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
