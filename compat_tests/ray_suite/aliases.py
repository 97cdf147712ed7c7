"""The ``ray`` alias for Ray's test files: rayreact plus shims for the Ray modules they import.

Also makes ``ray.tests`` the Ray checkout's tests directory (for both backends:
Ray's wheel does not ship its tests), so ``from ray.tests.client_test_utils import ...``
finds the checkout's helpers.
"""

import importlib.util
import os
import sys
import types

SHIMS = "compat_tests.ray_suite.shims"

OVERRIDES = {
    "ray._private": f"{SHIMS}.private_pkg",
    "ray._common": f"{SHIMS}.private_pkg",
    "ray._private.test_utils": f"{SHIMS}.test_utils",
    "ray._common.test_utils": f"{SHIMS}.test_utils",
    "ray._private.ray_constants": f"{SHIMS}.ray_constants",
    "ray._private.worker": f"{SHIMS}.worker",
    "ray.cluster_utils": f"{SHIMS}.cluster_utils",
}
# Shimmed only where rayreact has no module of its own.
FALLBACKS = {
    "ray.util.state": f"{SHIMS}.util_state",
}

_ENV_TESTS_DIR = "RAYREACT_SUITE_RAY_TESTS"


def install(tests_dir=None):
    """Alias ``ray`` to rayreact with the shims; map ``ray.tests`` to ``tests_dir``."""
    from rayreact.compat import alias

    overrides = dict(OVERRIDES)
    for name, shim in FALLBACKS.items():
        if importlib.util.find_spec("rayreact" + name[3:]) is None:
            overrides[name] = shim
    if tests_dir:
        os.environ[_ENV_TESTS_DIR] = os.path.abspath(tests_dir)
        overrides["ray.tests"] = "dir:" + os.path.abspath(tests_dir)
    alias.install(overrides)
    _ensure_setproctitle()


def install_for_subprocess():
    """In a driver started by ``run_string_as_driver``: the same alias as the test process."""
    install(os.environ.get(_ENV_TESTS_DIR))


def map_ray_tests(tests_dir):
    """Make ``ray.tests`` the package at ``tests_dir`` (whatever ``ray`` is)."""
    import ray

    module = types.ModuleType("ray.tests")
    module.__path__ = [os.path.abspath(tests_dir)]
    module.__package__ = "ray.tests"
    sys.modules["ray.tests"] = module
    try:
        ray.tests = module
    except AttributeError:
        pass


SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def _ensure_setproctitle():
    """Ray's tests import ``setproctitle``; offer the stand-in in ``site/`` if it is not installed."""
    if importlib.util.find_spec("setproctitle") is None and SITE_DIR not in sys.path:
        sys.path.append(SITE_DIR)
