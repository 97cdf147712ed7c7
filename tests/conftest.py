"""Shared fixtures: every semantic test runs on rayreact AND on real Ray.

``ray_backend`` is module-scoped and parametrized, so pytest runs a module's
tests once per backend with one ``init`` each (real Ray takes seconds to start).
Tests that need their own ``init`` arguments use ``backend_module`` and call
``init``/``shutdown`` themselves; they must live in modules that do not use
``ray_backend`` (two live sessions of real Ray cannot coexist).

At the end of the session we check that rayreact left no worker process and no
shared-memory segment behind.
"""

import asyncio
import glob
import importlib
import os
import subprocess
import time

import pytest

BACKENDS = ["rayreact", "ray"]

# Remote functions and classes defined at module level in test files are pickled
# by reference (``test_actors.Counter``), so worker processes must be able to
# import the test modules.  Workers inherit the driver's environment on both
# backends; putting this directory on PYTHONPATH before any ``init`` does it the
# way a user's project would.
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [_TESTS_DIR, os.environ.get("PYTHONPATH")] if p)


def _import_backend(name):
    return importlib.import_module(name)


def backend_fixture(**init_kwargs):
    """A module-scoped, backend-parametrized fixture that calls ``init(**init_kwargs)``.

    A test module that needs a differently configured session (GPUs, custom
    resources) assigns the result to the name ``ray_backend``; pytest's fixture
    overriding then routes every fixture below (``signal``...) through it.
    """
    kwargs = dict(num_cpus=2, include_dashboard=False, log_to_driver=True)
    kwargs.update(init_kwargs)

    @pytest.fixture(scope="module", params=BACKENDS)
    def _backend(request):
        ray = _import_backend(request.param)
        if ray.is_initialized():
            ray.shutdown()
        ray.init(**kwargs)
        yield ray
        ray.shutdown()

    return _backend


ray_backend = backend_fixture()


@pytest.fixture(params=BACKENDS)
def backend_module(request):
    """The backend module, not initialized; the test owns init/shutdown."""
    ray = _import_backend(request.param)
    if ray.is_initialized():
        ray.shutdown()
    yield ray
    if ray.is_initialized():
        ray.shutdown()


def submodule(ray, name):
    """``submodule(ray, "util.queue")`` is ``ray.util.queue`` or ``rayreact.util.queue``."""
    return importlib.import_module(f"{ray.__name__}.{name}")


def wait_until(predicate, timeout=60.0, interval=0.05):
    """Poll ``predicate`` until it is true; ``AssertionError`` if it never becomes so.

    For state that Ray reports asynchronously (resource views); a deadline, not
    a timing assertion: a fast backend passes at once.
    """
    deadline = time.time() + timeout
    while True:
        if predicate():
            return
        if time.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


class Signal:
    """An async actor body: ``wait`` blocks until some caller has called ``send``.

    Lets tests order events across processes without sleeping: a task that
    waits on a signal is provably still running until the test sends it.
    """

    def __init__(self):
        self._event = asyncio.Event()

    async def send(self):
        self._event.set()

    async def wait(self):
        await self._event.wait()

    async def is_set(self):
        return self._event.is_set()


@pytest.fixture
def signal(ray_backend):
    """A fresh ``Signal`` actor on the module's backend."""
    handle = ray_backend.remote(Signal).remote()
    yield handle
    ray_backend.kill(handle)


# The machine is shared: other people's rayreact sessions may be running while
# the suite runs.  Processes we started carry this marker in their environment
# (workers inherit the driver's), so the leak check only counts ours.
_SUITE_MARKER = f"RAYREACT_TEST_SUITE={os.getpid()}-{time.time_ns()}"
os.environ["RAYREACT_TEST_SUITE"] = _SUITE_MARKER.split("=", 1)[1]


def _environ_has_marker(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return _SUITE_MARKER.encode() in f.read().split(b"\0")
    except OSError:
        return False


def rayreact_processes():
    """PIDs of processes this suite's rayreact sessions started (workers and their zygote)."""
    out = subprocess.run(["pgrep", "-f", "rayreact.core.(worker|zygote)"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid() and _environ_has_marker(int(p))]


def _all_segments():
    return set(glob.glob("/dev/shm/rr-*")
               + glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "rayreact-shm-*", "rr-*")))


def _segments_in_use_by_live_processes():
    """Paths of rr-* files that some live process maps or holds open."""
    used = set()
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(proc, "maps")) as f:
                used.update(line.split(None, 5)[5].strip() for line in f if "/rr-" in line and len(line.split(None, 5)) == 6)
            for fd in os.listdir(os.path.join(proc, "fd")):
                try:
                    target = os.readlink(os.path.join(proc, "fd", fd))
                except OSError:
                    continue
                if "/rr-" in target:
                    used.add(target)
        except OSError:
            continue
    return used


_SEGMENTS_BEFORE_SUITE = _all_segments()


def rayreact_segments():
    """rr-* segments created during the suite that no live process is using.

    Another session's segments are in use by its processes; ours must be gone
    once our processes are.
    """
    new = _all_segments() - _SEGMENTS_BEFORE_SUITE
    if not new:
        return []
    return sorted(new - _segments_in_use_by_live_processes())


@pytest.fixture(scope="session", autouse=True)
def no_leaks_after_suite():
    yield
    import rayreact
    # While the core is not written yet (tests run with ``-k "not rayreact"``) the
    # facade has no is_initialized; the process/segment checks still run.
    if getattr(rayreact, "is_initialized", lambda: False)():
        rayreact.shutdown()
    deadline = time.time() + 10
    while time.time() < deadline and (rayreact_processes() or rayreact_segments()):
        time.sleep(0.2)
    assert rayreact_processes() == [], "rayreact left worker processes behind"
    assert rayreact_segments() == [], "rayreact left shared-memory segments behind"
