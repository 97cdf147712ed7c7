"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray).

``current`` implements :class:`rayreact.core.runtime_api.RuntimeAPI`; the facade calls nothing else.
"""

import os

from .. import exceptions
from .runtime_api import RuntimeBase, RuntimeFront

current = None  # set by init() in the driver, by the worker main loop in workers
_start_session = None   # what starts a session when an API call comes before init() (the facade names it)
forked_from = None      # the pid whose session this process inherited by fork, and may not use


def _forget_session_in_child():
    # A child of fork() holds the parent's rings and runtime objects.  Using them would interleave its
    # messages with the parent's, and its atexit shutdown would end the parent's session: the child
    # gets no session (it may start its own with init()).
    global current, forked_from
    if current is not None and not current.survives_fork:
        forked_from = os.getppid()
        current = None


os.register_at_fork(after_in_child=_forget_session_in_child)


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


def refuse_if_forked():
    """Before an API call starts a session on first use: a forked child's call is an error (see above)."""
    if forked_from is not None:
        raise exceptions.ForkedSessionError(
            f"This process was forked from pid {forked_from} while that process had a rayreact session; "
            "the session belongs to the parent and a forked child cannot use it. Call ray.init() in the "
            "child to start a session of its own.")


def start_sessions_with(start):
    """The facade's ``init``-on-first-use: ``start()`` returns the runtime it made current."""
    global _start_session
    _start_session = start


# The base of rayreact's own runtimes (driver, worker, local mode), under the name they subclass.
RuntimeHooks = RuntimeBase
