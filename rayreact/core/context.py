"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray)."""

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


class RuntimeHooks:
    """Notifications the API objects send to the runtime of their process; no-ops unless overridden.

    ObjectRef calls this when a ref is unpickled, so a runtime that counts references
    (the driver) can; the others inherit it.  Actor handles count through core.handles.
    """

    def on_ref_unpickled(self, object_id):
        pass
