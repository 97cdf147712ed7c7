"""Run Ray's own public-API test files against rayreact (see compat_tests/README.md).

``python -m compat_tests.ray_suite --ray-tests DIR`` runs the target files of a
Ray checkout's ``python/ray/tests`` with :mod:`compat_tests.ray_suite.plugin`:
``ray`` aliased to rayreact, Ray's fixtures and test helpers provided, and the
documented skip list (:mod:`compat_tests.ray_suite.skips`) applied.
"""

TARGET_FILES = [
    "test_basic_2.py",
    "test_actor.py",
    "test_wait.py",
    "test_actor_pool.py",
    "test_queue.py",
    "test_top_level_api.py",
    "test_get_or_create_actor.py",
    "test_generators.py",
    "test_actor_failures.py",
]
