"""``rayreact run | compare | bench | status | timeline``.

``rayreact run script.py [args...]`` runs an unmodified ``import ray`` script
with rayreact standing in for ``ray`` and every ``ray.*`` submodule, in this
process and in every worker it starts.
"""

from __future__ import annotations

import argparse
import os
import sys


def _run(argv):
    parser = argparse.ArgumentParser(prog="rayreact run", description=_run.__doc__)
    parser.add_argument("--no-reactor", action="store_true", help="replay off: dynamic runtime only")
    parser.add_argument("--colocate", action="store_true",
                        help="actors share host processes, about one per core (as RAYREACT_COLOCATE=1 does)")
    parser.add_argument("--trace", metavar="PATH", help="write a JSON-lines call trace (see rayreact.core.trace)")
    parser.add_argument("--explain", action="store_true",
                        help="at exit, print what the reactor replayed (as RAYREACT_EXPLAIN=1 does)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.explain:
        os.environ["RAYREACT_EXPLAIN"] = "1"
    if ns.no_reactor:
        os.environ["RAYREACT_REACTOR"] = "0"
    if ns.colocate:
        os.environ["RAYREACT_COLOCATE"] = "1"
    if ns.trace:
        os.environ["RAYREACT_TRACE"] = os.path.abspath(ns.trace)
    os.environ["RAYREACT_ALIAS_RAY"] = "1"
    from .compat import alias, script_runner
    alias.install()
    return script_runner.run_script(ns.script, ns.args)


_run.__doc__ = "Run an unmodified Ray script on rayreact."


def _compare(argv):
    import importlib.util
    if importlib.util.find_spec("ray") is None:
        print("rayreact compare runs the script under real Ray as well, and Ray is not installed here: "
              "pip install 'rayreact[compare]'", file=sys.stderr)
        return 2
    from .compat import compare
    return compare.main(argv)


BENCH_HELP = """rayreact bench runs the benchmarks of a rayreact source checkout (its benchmarks/ folder,
which an installed package does not carry), from the checkout's root:

    git clone <rayreact's repository> && cd rayreact
    pip install '.[bench]'          # real Ray, gymnasium and ALE: the peers and workloads
    rayreact bench --quick

Looked for benchmarks/runner.py in {here}."""


def _bench(argv):
    import runpy
    here = os.getcwd()
    if not os.path.isfile(os.path.join(here, "benchmarks", "runner.py")):
        print(BENCH_HELP.format(here=here), file=sys.stderr)
        return 2
    sys.argv = ["benchmarks", *argv]
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        runpy.run_module("benchmarks", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code or 0
    return 0


def _status(argv):
    from .core import channel
    import glob
    sessions = glob.glob("/dev/shm/rr-*")      # each live session's private directory (core.session_dir)
    print(f"rayreact {__import__('rayreact').__rayreact_version__} (Ray API {__import__('rayreact').__version__})")
    print(f"channels: {channel.IMPLEMENTATION}")
    print(f"sessions with shared memory in /dev/shm: {len(sessions)}")
    return 0


def _timeline(argv):
    parser = argparse.ArgumentParser(prog="rayreact timeline")
    parser.add_argument("script")
    parser.add_argument("--out", default="timeline.json")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    os.environ["RAYREACT_TIMELINE"] = os.path.abspath(ns.out)
    return _run([ns.script, *ns.args])


COMMANDS = {"run": _run, "compare": _compare, "bench": _bench, "status": _status, "timeline": _timeline}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: rayreact {run,compare,bench,status,timeline} ...\n"
              "  run script.py [args]      run an unmodified Ray script on rayreact\n"
              "  compare script.py [args]  run under real Ray and rayreact, diff the call traces\n"
              "  bench [--quick] [--only NAME]  side-by-side benchmarks (rayreact vs Ray)\n"
              "  status                    build and session information\n"
              "  timeline script.py        run and write a Chrome trace", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
