"""A description of the machine and software a benchmark ran on."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess

from benchmarks.backends import REPO_ROOT

PACKAGES = ["ray", "torch", "numpy", "gymnasium", "ale-py", "cloudpickle"]


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _git_commit():
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "rayreact"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("+uncommitted rayreact changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def describe():
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": versions,
        "rayreact_commit": _git_commit(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def one_line(machine):
    p = machine["packages"]
    return (f"{machine['cpu_model']}, {machine['usable_cores']} cores, {machine['memory_gib']} GiB RAM, "
            f"{machine['os']}; Python {machine['python']}, Ray {p.get('ray')}, torch {p.get('torch')}, "
            f"numpy {p.get('numpy')}, gymnasium {p.get('gymnasium')}, ale-py {p.get('ale-py')}; "
            f"rayreact {machine['rayreact_commit']}")
