"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray)."""

current = None  # set by init() in the driver, by the worker main loop in workers


def get():
    return current


class RuntimeHooks:
    """Notifications the API objects send to the runtime of their process; no-ops unless overridden.

    ObjectRef and ActorHandle call these on creation, unpickling and deletion, so a
    runtime that counts references (the driver) can; the others inherit these.
    """

    def on_ref_unpickled(self, object_id):
        pass

    def on_handle_created(self, actor_id):
        pass

    def on_handle_dropped(self, actor_id):
        pass

    def on_handle_pickled(self, actor_id):
        pass
