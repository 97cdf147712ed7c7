"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray).

``current`` implements :class:`rayreact.core.runtime_api.RuntimeAPI`; the facade calls nothing else.
"""

from .runtime_api import RuntimeBase, RuntimeFront

current = None  # set by init() in the driver, by the worker main loop in workers
_start_session = None   # what starts a session when an API call comes before init() (the facade names it)


def get():
    return current


def dynamic_runtime():
    """The runtime that runs calls dynamically: ``current``, or the one a layer in front of it (the
    reactor) holds.  For introspection and tests; the facade calls ``current``."""
    rt = current
    return rt.behind if isinstance(rt, RuntimeFront) else rt


def runtime():
    """This process' runtime, for the API's hot paths (``.remote``): and init() when none runs yet."""
    rt = current
    if rt is None:
        rt = _start_session()
    return rt


def start_sessions_with(start):
    """The facade's ``init``-on-first-use: ``start()`` returns the runtime it made current."""
    global _start_session
    _start_session = start


# The base of rayreact's own runtimes (driver, worker, local mode), under the name they subclass.
RuntimeHooks = RuntimeBase
