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
import faulthandler
import glob
import importlib
import inspect
import os
import re
import shutil
import subprocess
import tempfile
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


REPLAY = "rayreact-replay"
COLOCATED = "rayreact-colocated"    # rayreact with actors sharing host processes (init(_colocate=True))
REPLAY_REPETITIONS = 5      # in the last full count, no scenario replayed first at a 6th repetition
_replayed_in_module = {}           # module name -> tests whose scenario ran (partly) replayed
_worker_faults = []                # (xdist worker id, the tail of its fault file) for each worker that died
_replay_summary = []               # (module, scenarios replayed, tests run, periods replayed), for the report


def backend_fixture(per_backend=None, replay=False, must_replay=True, colocate=False, **init_kwargs):
    """A module-scoped, backend-parametrized fixture that calls ``init(**init_kwargs)``.

    ``replay=True`` adds the third backend, ``rayreact-replay``: rayreact with the reactor on, where each
    test whose only fixture is the backend repeats its scenario, assertions and all, until a repetition
    ran replayed, and once more, so that the replayed period can complete (at most ``REPLAY_REPETITIONS``
    in all); the module fails at its end unless some test did
    (``must_replay=False`` for a module whose scenarios the reactor declines by design: its module says why).
    ``colocate=True`` adds ``rayreact-colocated``: rayreact with actors sharing host processes, the same
    assertions (what only differs by design, an actor's pid, asks :func:`colocated`).

    A test module that needs a differently configured session (GPUs, custom
    resources) assigns the result to the name ``ray_backend``; pytest's fixture
    overriding then routes every fixture below (``signal``...) through it.
    ``per_backend`` adds keywords for one backend only, e.g.
    ``{"rayreact": {"local_mode": True}}``.
    """
    kwargs = dict(num_cpus=2, include_dashboard=False, log_to_driver=True)
    kwargs.update(init_kwargs)

    @pytest.fixture(scope="module", params=BACKENDS + ([REPLAY] if replay else []) + ([COLOCATED] if colocate else []))
    def _backend(request):
        name = request.param
        ray = _import_backend("rayreact" if name in (REPLAY, COLOCATED) else name)
        if ray.is_initialized():
            ray.shutdown()
        ray.init(**kwargs, **(per_backend or {}).get(name, {}), **({"_reactor": True} if name == REPLAY else {}),
                 **({"_colocate": True} if name == COLOCATED else {}))
        record_our_sessions()
        yield ray
        if name == REPLAY:
            replayed = _replayed_in_module.pop(request.module.__name__, [])
            explained = ray.explain(quiet=True)
            report = str(explained)
            tests = sum(1 for item in request.session.items
                        if item.module is request.module and getattr(item, "callspec", None) is not None
                        and item.callspec.params.get("ray_backend") == REPLAY)
            _replay_summary.append((request.module.__name__, len(replayed), tests, explained.periods_replayed))
            ray.shutdown()
            assert replayed or not must_replay, f"no scenario of {request.module.__name__} ran replayed:\n{report}"
            return
        ray.shutdown()

    return _backend


def colocated(ray):
    """Whether ``ray`` (a backend module) runs actors co-located: several actors may share a pid."""
    if ray.__name__ != "rayreact":
        return False
    from rayreact.core import context
    return getattr(context.dynamic_runtime(), "colocation", None) is not None


def pytest_pyfunc_call(pyfuncitem):
    """On the rayreact-replay backend, run a scenario again and again until a repetition ran replayed."""
    callspec = getattr(pyfuncitem, "callspec", None)
    if callspec is None or callspec.params.get("ray_backend") != REPLAY:
        return None
    arguments = list(inspect.signature(pyfuncitem.obj).parameters)
    if not set(arguments) <= {"ray_backend"} | set(callspec.params):
        return None                  # other fixtures (signals, gates, files) are made for one run: run once
    import rayreact
    from rayreact.core import context

    context.current.reset()          # record this scenario afresh, not the tail of the previous test
    funcargs = {name: pyfuncitem.funcargs[name] for name in arguments}
    before = rayreact.explain(quiet=True).replayed_events
    replayed_at = None
    for repetition in range(REPLAY_REPETITIONS):
        pyfuncitem.obj(**funcargs)
        after = rayreact.explain(quiet=True).replayed_events
        if os.environ.get("RAYREACT_REPLAY_LOG"):
            with open(os.environ["RAYREACT_REPLAY_LOG"], "a") as log:
                log.write(f"{pyfuncitem.nodeid} {repetition} {after > before} {time.monotonic():.3f}\n")
        if replayed_at is not None:
            break                    # (once more after the first replayed run: its period can complete)
        if after > before:
            _replayed_in_module.setdefault(pyfuncitem.module.__name__, []).append(pyfuncitem.name)
            replayed_at = repetition
        before = after
    return True


ray_backend = backend_fixture()

_VARIANT_INIT = {"rayreact-off": {"_reactor": False}, "rayreact-local": {"local_mode": True}}


def named_backend_fixture(names):
    """A module-scoped fixture over backend names ("rayreact", "rayreact-off" for the reactor off,
    "rayreact-local" for local mode, "ray"), yielding (name, initialized module)."""

    @pytest.fixture(scope="module", params=names)
    def _backend(request):
        name = request.param
        module = _import_backend("ray" if name == "ray" else "rayreact")
        if module.is_initialized():
            module.shutdown()
        module.init(num_cpus=2, include_dashboard=False, **_VARIANT_INIT.get(name, {}))
        record_our_sessions()
        yield name, module
        module.shutdown()

    return _backend


@pytest.fixture(params=BACKENDS)
def backend_module(request, monkeypatch):
    """The backend module, not initialized; the test owns init/shutdown."""
    ray = _import_backend(request.param)
    if ray.is_initialized():
        ray.shutdown()
    original_init = ray.init

    def init_and_record(*args, **kwargs):
        context = original_init(*args, **kwargs)
        record_our_sessions()
        return context

    # Not a mock: the real init runs; we only note which shared-memory session
    # it created so the leak check can find what this suite left behind.
    monkeypatch.setattr(ray, "init", init_and_record)
    yield ray
    record_our_sessions()
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


def wait_until_calls_fail(ray, call, timeout=60.0):
    """Poll ``call()`` (returning a ref) until getting it raises RayActorError; fail after ``timeout``.

    Ray's ``kill`` is asynchronous: a call sent just after it may still run.
    What both backends guarantee is that calls fail once the kill has landed.
    """
    def failing():
        try:
            ray.get(call(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return True
        return False

    wait_until(failing, timeout=timeout)


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
def fresh_rayreact():
    """rayreact, shut down before and after the test: the test owns its session (and its init options)."""
    import rayreact
    if rayreact.is_initialized():
        rayreact.shutdown()
    yield rayreact
    if rayreact.is_initialized():
        rayreact.shutdown()


def wait_for_file(path, timeout=120.0):
    """Block, without calling into the backend, until ``path`` exists.

    A task blocked in ``get`` gives its CPU back in Ray; one blocked here keeps
    it, which is what tests of CPU accounting need.
    """
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


class FileGate:
    """A one-shot gate across processes: ``wait_for_file(gate.path)`` until ``gate.open()``."""

    def __init__(self, path):
        self.path = str(path)

    def open(self):
        with open(self.path, "w"):
            pass


@pytest.fixture
def gate(tmp_path):
    g = FileGate(tmp_path / "gate-open")
    yield g
    g.open()  # never leave a task blocked on it


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


def _maps_session_files(pid):
    """Whether ``pid`` maps rayreact session files (a worker titled ``ray::...``, unlike Ray's own workers)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "/rr-" in f.read()
    except OSError:
        return False


def rayreact_processes():
    """PIDs of processes this suite's rayreact sessions started (workers and their zygote)."""
    out = subprocess.run(["pgrep", "-f", "rayreact.core.(worker|zygote)|^ray::"], capture_output=True,
                         text=True).stdout
    pids = [int(p) for p in out.split() if int(p) != os.getpid() and _environ_has_marker(int(p))]
    return [p for p in pids if _maps_session_files(p)]


def _all_segments():
    return set(glob.glob("/dev/shm/rr-*")
               + glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "rayreact-shm-*", "rr-*")))


_SESSION_PREFIX = re.compile(r"/(rr-[0-9a-f]+)(?:-|/|$)")    # a session's files, or its private directory
_OUR_SESSIONS = set()


def record_our_sessions():
    """Note the rr-<session> prefixes this process has mapped (its live rayreact session)."""
    try:
        with open("/proc/self/maps") as f:
            _OUR_SESSIONS.update(m.group(1) for m in map(_SESSION_PREFIX.search, f) if m)
    except OSError:
        pass


@pytest.fixture(autouse=True)
def _record_sessions_of_each_test():
    yield
    record_our_sessions()


def rayreact_segments():
    """Segments left by this suite's rayreact sessions.

    Segment names carry a per-session prefix; the driver (this process) maps
    its session's files, so we learn our prefixes after each ``init`` and each
    test, and ignore other people's sessions on this shared machine.
    """
    return sorted(path for path in _all_segments()
                  if (m := _SESSION_PREFIX.search(path)) and m.group(1) in _OUR_SESSIONS)


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


# --- markers: the fast loop is `-m "not ray and not slow"` (README) ------------------------------------------
# ``ray``: the test starts real Ray (a backend parameter named "ray", or a module that runs scripts under
# Ray); ``slow``: end-to-end runs of whole scripts (compare, examples, benchmarks, a Ray cluster).
_RAY_MODULES = {"test_compat", "test_compat_multinode", "test_examples", "test_reactor_examples", "test_benchmarks",
                "test_surface_parity"}
_SLOW_MODULES = {"test_compat", "test_compat_multinode", "test_examples", "test_reactor_examples",
                 "test_benchmarks"}


_FAULTS_DIR = "RAYREACT_TEST_FAULTS_DIR"
_fault_file = None


@pytest.hookimpl(trylast=True)        # after pytest's faulthandler plugin, which would send the dump to stderr
def pytest_configure(config):
    config.addinivalue_line("markers", "ray: starts real Ray (the oracle); deselect with -m 'not ray'")
    config.addinivalue_line("markers", "slow: runs whole scripts end to end; deselect with -m 'not slow'")
    # A worker of pytest-xdist that dies (a fatal signal) takes its traceback with it; each worker writes
    # faulthandler's dump to its own file, which the controller prints when the worker goes down.
    global _fault_file
    if getattr(config, "workerinput", None) is None:
        if _FAULTS_DIR not in os.environ:
            os.environ[_FAULTS_DIR] = tempfile.mkdtemp(prefix="rayreact-test-faults-")
    elif os.environ.get(_FAULTS_DIR):
        name = os.path.join(os.environ[_FAULTS_DIR], config.workerinput["workerid"])
        _fault_file = open(name, "w", buffering=1)
        faulthandler.enable(_fault_file, all_threads=True)


def pytest_unconfigure(config):
    global _fault_file
    if _fault_file is not None:
        faulthandler.disable()
        _fault_file.close()
        _fault_file = None
    if getattr(config, "workerinput", None) is None and os.environ.get(_FAULTS_DIR, "").startswith(
            os.path.join(tempfile.gettempdir(), "rayreact-test-faults-")):
        shutil.rmtree(os.environ.pop(_FAULTS_DIR), ignore_errors=True)


def pytest_runtest_logstart(nodeid, location):
    if _fault_file is not None:
        _fault_file.write(f"started {nodeid}\n")


def _runs_real_ray(item):
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(isinstance(v, str) and v == "ray" for v in callspec.params.values()):
        return True
    return item.module.__name__.rpartition(".")[2] in _RAY_MODULES


@pytest.hookimpl(tryfirst=True)       # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _runs_real_ray(item):
            item.add_marker(pytest.mark.ray)
        if item.module.__name__.rpartition(".")[2] in _SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


# Under pytest-xdist (README's test command runs two workers) each worker keeps its own summary: it hands
# it to the controller when it finishes, which prints them all.
def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["replay_summary"] = list(_replay_summary)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _replay_summary.extend(tuple(row) for row in getattr(node, "workeroutput", {}).get("replay_summary", []))
    if error and os.environ.get(_FAULTS_DIR):
        name = os.path.join(os.environ[_FAULTS_DIR], node.gateway.id)
        try:
            with open(name) as f:
                tail = f.read()[-20000:]
        except OSError as e:
            tail = f"(no fault file: {e})"
        _worker_faults.append((node.gateway.id, tail))


def pytest_terminal_summary(terminalreporter):
    for worker, tail in _worker_faults:
        terminalreporter.write_line(f"pytest-xdist worker {worker} went down; the tail of what it left:")
        for line in tail.splitlines():
            terminalreporter.write_line(f"  {line}")
    for module, replayed, tests, periods in _replay_summary:
        terminalreporter.write_line(f"rayreact-replay: {module}: {replayed} of {tests} scenarios ran replayed "
                                    f"({periods} periods replayed)")
