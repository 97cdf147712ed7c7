"""How to launch an unmodified Ray script under each backend.

A backend is a command prefix plus environment variables. Real Ray runs the
script as is; rayreact runs it through its CLI's ``run`` (wrapped by
``benchmarks.rayreact_launcher``, which also notes what the reactor replayed),
which makes ``import ray`` resolve to rayreact; the reactor switch is the
``RAYREACT_REACTOR`` environment variable, and ``RAYREACT_COLOCATE`` makes actors share host
processes (the fourth column).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Backend:
    name: str                  # stable key used in results.json
    label: str                 # column heading
    launcher: tuple            # argv prefix before the script path
    env: dict = field(default_factory=dict)
    reports_reactor: bool = False   # the launcher can write a summary of the reactor's replay

    def command(self, script, args=()):
        return [*self.launcher, script, *args]

    def environment(self, reactor_report=None):
        env = dict(os.environ)
        env.update(self.env)
        if self.reports_reactor and reactor_report:
            env["BENCH_REACTOR_REPORT"] = reactor_report
        # the harness may run from anywhere; scripts and `python -m rayreact` need the repo importable
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env


RAY = Backend("ray", "Ray", (sys.executable,))
_RAYREACT_RUN = (sys.executable, "-m", "benchmarks.rayreact_launcher")  # = python -m rayreact run
RAYREACT = Backend("rayreact", "rayreact", _RAYREACT_RUN, {"RAYREACT_REACTOR": "1"}, reports_reactor=True)
RAYREACT_NO_REACTOR = Backend("rayreact-noreactor", "rayreact (reactor off)", _RAYREACT_RUN,
                              {"RAYREACT_REACTOR": "0"}, reports_reactor=True)
RAYREACT_COLOCATED = Backend("rayreact-colocated", "rayreact (co-located)", _RAYREACT_RUN,
                             {"RAYREACT_REACTOR": "1", "RAYREACT_COLOCATE": "1"}, reports_reactor=True)
# The same script with no Ray at all (only scripts that support --serial), for baselines.
SERIAL = Backend("serial", "no Ray, one process", (sys.executable,))
# The same envs in a plain process per core, no runtime (scripts that support --spread N): the floor of a
# lock-step round spread over the cores.
SPREAD = Backend("spread", "no Ray, a plain process per core", (sys.executable,))

ALL = {b.name: b for b in (RAY, RAYREACT, RAYREACT_NO_REACTOR, RAYREACT_COLOCATED)}


def reactor_available():
    """Whether this rayreact has a reactor to switch off (its replay phase, rayreact.core.replay)."""
    try:
        return importlib.util.find_spec("rayreact.core.replay") is not None
    except ImportError:
        return False
