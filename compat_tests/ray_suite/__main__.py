"""``python -m compat_tests.ray_suite --ray-tests DIR [--ray-backend ray] [pytest args]``.

Runs the target files (``compat_tests.ray_suite.TARGET_FILES``) of DIR under the
plugin, one pytest session per file (each file gets a clean interpreter, as Ray's
own CI does), and prints pass/skip/fail counts per file and in total.
"""

import argparse
import importlib.util
import os
import re
import subprocess
import sys

from compat_tests.ray_suite import TARGET_FILES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m compat_tests.ray_suite")
    p.add_argument("--ray-tests", default=os.environ.get("RAYREACT_RAY_TESTS"), required=False,
                   help="a Ray checkout's python/ray/tests")
    p.add_argument("--ray-backend", choices=["rayreact", "ray"], default="rayreact")
    p.add_argument("--files", nargs="*", default=TARGET_FILES)
    p.add_argument("--timeout", type=int, default=120, help="per test, seconds")
    ns, pytest_args = p.parse_known_args(argv)
    if not ns.ray_tests:
        p.error("--ray-tests (or RAYREACT_RAY_TESTS) is required")
    totals = {"passed": 0, "skipped": 0, "failed": 0, "error": 0, "xfailed": 0, "xpassed": 0}
    rows = []
    from compat_tests.ray_suite import aliases

    paths = [ROOT, os.environ.get("PYTHONPATH")]
    if importlib.util.find_spec("setproctitle") is None:
        paths.append(aliases.SITE_DIR)  # workers import it too (by reference)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    for name in ns.files:
        path = os.path.join(ns.ray_tests, name)
        cmd = [sys.executable, "-m", "pytest", path, "-p", "compat_tests.ray_suite.plugin", "--noconftest",
               "-p", "no:cacheprovider", "--rootdir", ns.ray_tests, "--ray-tests", ns.ray_tests,
               "--ray-backend", ns.ray_backend, f"--timeout={ns.timeout}", "-q", "-rfE", *pytest_args]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        sys.stdout.write(proc.stdout[-4000:])
        counts = _counts(proc.stdout)
        rows.append((name, counts))
        for k in totals:
            totals[k] += counts.get(k, 0)
    print(f"\nRay test files against {ns.ray_backend}:")
    for name, counts in rows:
        print(f"  {name:<24} " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    print("  total                    " + ", ".join(f"{k} {v}" for k, v in totals.items() if v))
    return 0 if totals["failed"] == 0 and totals["error"] == 0 else 1


def _counts(output):
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", line)]
    counts = {}
    if summary:
        for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary[-1]):
            counts["error" if word.startswith("error") else word] = int(n)
    return counts


if __name__ == "__main__":
    sys.exit(main())
