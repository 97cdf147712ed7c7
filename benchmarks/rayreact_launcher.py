"""``rayreact run``, plus a note of what the reactor did, for the benchmark tables.

Runs the script exactly as ``python -m rayreact run`` does. If the environment
names a file in ``BENCH_REACTOR_REPORT``, then just before the script's
``ray.shutdown()`` (or at exit, if it never calls it) we ask
``rayreact.explain()`` what the reactor replayed and write a short JSON
summary there: whether a pattern was replayed at all is what tells a
reactor-on figure from a dynamic-mode one.
"""

import atexit
import json
import os
import sys


def _summarize(explanation):
    snapshot = explanation.snapshot
    return {
        "enabled": bool(snapshot.get("enabled")),
        "why_disabled": snapshot.get("why"),
        "state": explanation.state,
        "replay_runs": len(explanation.runs),
        "periods_replayed": explanation.periods_replayed,
        "replayed_fraction": explanation.replayed_fraction,
        "period_lengths": [getattr(run.get("plan"), "period", None) for run in explanation.runs],
        "fallbacks": [str(reason) for _, reason, _ in explanation.fallbacks][:10],
        "refusals": {str(reason): count for reason, count in explanation.refusals.items()},
        "colocation": list(snapshot.get("colocation", ())),     # where actors went (co-located runs)
    }


def _install_reactor_report(path):
    import rayreact

    written = []

    def write_report():
        if written or not rayreact.is_initialized():
            return
        try:
            summary = _summarize(rayreact.explain(quiet=True))
        except Exception as e:  # the figure still counts; only the note is missing
            summary = {"error": repr(e)}
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
        written.append(path)

    original_shutdown = rayreact.shutdown

    def shutdown(*args, **kwargs):
        write_report()
        return original_shutdown(*args, **kwargs)

    rayreact.shutdown = shutdown
    atexit.register(write_report)


def main():
    path = os.environ.get("BENCH_REACTOR_REPORT")
    if path:
        _install_reactor_report(path)
    from rayreact.cli import main as rayreact_main

    return rayreact_main(["run", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
