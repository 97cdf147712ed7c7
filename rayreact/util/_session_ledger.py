"""Where the placement-group API finds the session's ``ResourceLedger``.

The core owns the ledger (its scheduler grants resources from it) and hands it
out as ``rayreact._api.resource_ledger()`` -- in a worker process, an object with
the same methods that forwards to the driver's. Until the core offers that
hook, a stand-in ledger sized from ``cluster_resources()`` records this driver's
placement groups (creation, state, table, removal), but the scheduler does not
see it, so reservations do not hold other work back and tasks are not confined
to bundles.
"""

from __future__ import annotations

import importlib

from ._pg_accounting import ResourceLedger

_stand_in = {}  # job id -> ResourceLedger


def _core_hook():
    try:
        api = importlib.import_module("rayreact._api")
    except ImportError:
        return None
    return getattr(api, "resource_ledger", None)


def core_enforces_groups() -> bool:
    """Whether the scheduler itself honours placement groups."""
    return _core_hook() is not None


def session_ledger() -> ResourceLedger:
    """The ledger of the running session (starting one if needed, like any API call)."""
    hook = _core_hook()
    if hook is not None:
        return hook()
    import rayreact as ray

    job = ray.get_runtime_context().get_job_id()  # also starts a session if none runs
    if job not in _stand_in:
        _stand_in.clear()
        _stand_in[job] = ResourceLedger(ray.cluster_resources())
    return _stand_in[job]
