"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray).

``current`` implements :class:`rayreact.core.runtime_api.RuntimeAPI`; the facade calls nothing else.
"""

from .runtime_api import RuntimeBase

current = None  # set by init() in the driver, by the worker main loop in workers


def get():
    return current


def runtime():
    """This process' runtime, for the API's hot paths (``.remote``): an import only when init() must run."""
    rt = current
    if rt is None:
        from .. import _api
        rt = _api._runtime()
    return rt


# The base of rayreact's own runtimes (driver, worker, local mode), under the name they subclass.
RuntimeHooks = RuntimeBase
