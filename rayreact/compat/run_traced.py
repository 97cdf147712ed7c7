"""Run a script with tracing: ``python -m rayreact.compat.run_traced --backend ray --trace T script.py [args]``.

With ``--backend ray`` the script runs under real Ray with the wrapper of
:mod:`rayreact.compat.ray_tracer`; with ``--backend rayreact`` it runs under
rayreact (``ray`` aliased as by ``rayreact run``) with that same wrapper, for
rayreact builds whose core does not record natively.
"""

import argparse
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rayreact.compat.run_traced")
    parser.add_argument("--backend", choices=["ray", "rayreact"], default="ray")
    parser.add_argument("--trace", required=True)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)

    from rayreact.compat import ray_tracer, script_runner

    trace_path = os.path.abspath(ns.trace)
    if ns.backend == "rayreact":
        from rayreact.compat import alias

        alias.install()
    import ray

    ray_tracer.install(ray, trace_path)
    return script_runner.run_script(ns.script, ns.args)


if __name__ == "__main__":
    sys.exit(main())
