"""The ``rayreact`` command: ``run | compare | bench | status | timeline``.

``rayreact run script.py [args]`` runs an unmodified Ray script on rayreact:
``import ray`` (and every ``ray.X`` submodule) resolves to rayreact's modules,
then the script runs as ``__main__`` with ``sys.argv = [script, *args]``.
"""

from __future__ import annotations

import os
import subprocess
import sys

USAGE = """usage: rayreact <command> [args]

commands:
  run SCRIPT [ARGS...]       run an unmodified Ray script on rayreact
  compare SCRIPT [ARGS...]   run it under real Ray and under rayreact, compare what ran (see --help)
  bench [ARGS...]            side-by-side benchmarks (python -m benchmarks)
  status                     rayreact sessions on this machine
  timeline                   see ray.timeline() in your script
"""


def run(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: rayreact run SCRIPT [ARGS...]")
        return 0 if argv else 2
    from rayreact.compat import alias, script_runner

    alias.install()
    return script_runner.run_script(argv[0], argv[1:])


def compare(argv):
    from rayreact.compat import compare as _compare

    return _compare.main(argv)


def bench(argv):
    return subprocess.call([sys.executable, "-m", "benchmarks", *argv])


def status(argv):
    out = subprocess.run(["pgrep", "-af", "rayreact.core.(worker|zygote)"], capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if str(os.getpid()) not in line.split()[:1]]
    print(f"{len(lines)} rayreact worker process(es) on this machine")
    for line in lines:
        print("  " + line)
    return 0


def timeline(argv):
    print("Call ray.timeline(filename) in your script (rayreact writes Chrome-trace JSON), "
          "then open the file in https://ui.perfetto.dev or chrome://tracing.")
    return 0


COMMANDS = {"run": run, "compare": compare, "bench": bench, "status": status, "timeline": timeline}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"rayreact: unknown command {argv[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return command(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
