"""Shared fixtures: every semantic test runs on rayreact AND on real Ray.

``ray_backend`` is module-scoped and parametrized, so pytest runs a module's
tests once per backend with one ``init`` each (real Ray takes seconds to start).
Tests that need their own ``init`` arguments use ``backend_module`` and call
``init``/``shutdown`` themselves; they must live in modules that do not use
``ray_backend`` (two live sessions of real Ray cannot coexist).

At the end of the session we check that rayreact left no worker process and no
shared-memory segment behind.
"""

import glob
import importlib
import os
import subprocess
import time

import pytest

BACKENDS = ["rayreact", "ray"]


def _import_backend(name):
    return importlib.import_module(name)


@pytest.fixture(scope="module", params=BACKENDS)
def ray_backend(request):
    ray = _import_backend(request.param)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True)
    yield ray
    ray.shutdown()


@pytest.fixture(params=BACKENDS)
def backend_module(request):
    """The backend module, not initialized; the test owns init/shutdown."""
    ray = _import_backend(request.param)
    if ray.is_initialized():
        ray.shutdown()
    yield ray
    if ray.is_initialized():
        ray.shutdown()


def rayreact_processes():
    """PIDs of processes started by rayreact (workers and their zygote)."""
    out = subprocess.run(["pgrep", "-f", "rayreact.core.(worker|zygote)"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def rayreact_segments():
    return glob.glob("/dev/shm/rr-*") + glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "rayreact-shm-*", "rr-*"))


@pytest.fixture(scope="session", autouse=True)
def no_leaks_after_suite():
    yield
    import rayreact
    if rayreact.is_initialized():
        rayreact.shutdown()
    deadline = time.time() + 10
    while time.time() < deadline and (rayreact_processes() or rayreact_segments()):
        time.sleep(0.2)
    assert rayreact_processes() == [], "rayreact left worker processes behind"
    assert rayreact_segments() == [], "rayreact left shared-memory segments behind"
