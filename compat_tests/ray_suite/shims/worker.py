"""``ray._private.worker``: Ray's core-worker internals, which rayreact does not have.

Importing succeeds (test files import names from here at module level); the tests
that use them are on the skip list as tests of Ray internals.
"""


class _NoGlobalWorker:
    def __getattr__(self, name):
        raise AttributeError(f"rayreact has no Ray core worker (ray._private.worker.global_worker.{name})")


global_worker = _NoGlobalWorker()


def _wait_generators_bulk(*args, **kwargs):
    raise NotImplementedError("ray._private.worker._wait_generators_bulk is a Ray internal")
