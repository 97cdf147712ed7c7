"""Stand-ins for the Ray modules that Ray's test files import and rayreact does not have.

Only what the target test files touch at import time or through public helpers:
test utilities (``SignalActor``, ``wait_for_condition``, ...), a few constants,
and modules whose contents only skipped tests use.  Installed as alias overrides
by :mod:`compat_tests.ray_suite.plugin`, never imported by rayreact itself.
"""
