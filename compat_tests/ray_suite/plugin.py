"""pytest plugin that runs Ray's own test files against rayreact (or, for reference, real Ray).

Load it with ``-p compat_tests.ray_suite.plugin`` and ``--noconftest`` (Ray's
``tests/conftest.py`` needs Ray's internals); ``python -m compat_tests.ray_suite``
does that for you.  Options (or environment variables):

  --ray-tests DIR        Ray checkout's ``python/ray/tests``      (RAYREACT_RAY_TESTS)
  --ray-backend NAME     ``rayreact`` (default) or ``ray``        (RAYREACT_SUITE_BACKEND)

It provides Ray's fixtures with Ray's semantics (``shutdown_only``,
``ray_start_regular``, ``ray_start_regular_shared``, ``ray_start_2_cpus``,
``ray_start_10_cpus``, ...; ``request.param`` dicts become ``init`` keywords),
runs ``@pytest.mark.asyncio`` coroutine tests, and skips what
:mod:`compat_tests.ray_suite.skips` lists.
"""

import asyncio
import inspect
import os

import pytest

from compat_tests.ray_suite import aliases, skips

_BACKEND = None


def pytest_addoption(parser):
    group = parser.getgroup("ray_suite", "Ray's test files against rayreact")
    group.addoption("--ray-tests", default=os.environ.get("RAYREACT_RAY_TESTS"),
                    help="path to a Ray checkout's python/ray/tests")
    group.addoption("--ray-backend", default=os.environ.get("RAYREACT_SUITE_BACKEND", "rayreact"),
                    choices=["rayreact", "ray"], help="what `import ray` gives the tests")


def pytest_configure(config):
    global _BACKEND
    _BACKEND = config.getoption("--ray-backend")
    tests_dir = config.getoption("--ray-tests")
    if _BACKEND == "rayreact":
        aliases.install(tests_dir)
    elif tests_dir:
        aliases.map_ray_tests(tests_dir)
        aliases._ensure_setproctitle()
    config.addinivalue_line("markers", "asyncio: run the coroutine test in an event loop")


def pytest_report_header(config):
    import ray

    return f"ray_suite: `import ray` -> {ray.__name__} {getattr(ray, '__version__', '')}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = skips.reason_for(os.path.basename(str(item.fspath)), item.name)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"ray_suite skip list: {reason}"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Coroutine tests (``@pytest.mark.asyncio``) run to completion in a fresh event loop."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(pyfuncitem.obj(**kwargs))
    return True


# ---------------------------------------------------------------- fixtures

def _ray():
    import ray

    return ray


def _fresh_start(**overrides):
    """``ray.init`` with the defaults of Ray's test fixtures (1 CPU, 150 MB object store)."""
    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()
    kwargs = {"num_cpus": 1, "object_store_memory": 150 * 1024 * 1024, "include_dashboard": False}
    kwargs.update(overrides)
    return ray.init(**kwargs)


def _started(request, **defaults):
    params = dict(getattr(request, "param", {}) or {})
    info = _fresh_start(**{**defaults, **params})
    try:
        yield info
    finally:
        _ray().shutdown()


@pytest.fixture
def shutdown_only():
    yield None
    _ray().shutdown()


@pytest.fixture
def ray_start_regular(request):
    yield from _started(request)


@pytest.fixture(scope="module")
def ray_start_regular_shared(request):
    yield from _started(request)


@pytest.fixture(scope="module")
def ray_start_regular_shared_2_cpus(request):
    yield from _started(request, num_cpus=2)


@pytest.fixture
def ray_start_2_cpus(request):
    yield from _started(request, num_cpus=2)


@pytest.fixture
def ray_start_10_cpus(request):
    yield from _started(request, num_cpus=10)


@pytest.fixture
def ray_start_no_cpu(request):
    yield from _started(request, num_cpus=0)


@pytest.fixture(scope="module", params=[{"local_mode": True}, {"local_mode": False}])
def ray_start_shared_local_modes(request):
    yield from _started(request)


@pytest.fixture
def set_enable_auto_connect(request):
    value = getattr(request, "param", "0")
    saved = os.environ.get("RAY_ENABLE_AUTO_CONNECT")
    os.environ["RAY_ENABLE_AUTO_CONNECT"] = value
    try:
        yield value
    finally:
        if saved is None:
            os.environ.pop("RAY_ENABLE_AUTO_CONNECT", None)
        else:
            os.environ["RAY_ENABLE_AUTO_CONNECT"] = saved


def _multi_node(request):
    pytest.skip("ray_suite: " + skips.MULTI_NODE)


@pytest.fixture
def ray_start_cluster(request):
    _multi_node(request)


ray_start_cluster_head = ray_start_cluster
ray_start_cluster_enabled = ray_start_cluster
ray_start_cluster_2_nodes = ray_start_cluster
