"""Registers the Ray-suite plugin for tests collected under compat_tests/ray_suite/.

Ray's own test files live in the user's Ray checkout; run them with
``python -m compat_tests.ray_suite --ray-tests <checkout>/python/ray/tests``
(see compat_tests/README.md), which loads :mod:`compat_tests.ray_suite.plugin`.
"""

pytest_plugins = ["compat_tests.ray_suite.plugin"]
