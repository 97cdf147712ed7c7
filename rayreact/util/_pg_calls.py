"""How the placement-group API reaches the session's ``ResourceLedger``.

The ledger lives with the scheduler in the driver. The runtime serving this
process -- the driver's, a worker's (which forwards to the driver) or local
mode's -- takes ``placement_group_call(verb, payload)`` and hands it to
``ResourceLedger.handle`` under the scheduler's lock, then reschedules.
"""

from __future__ import annotations


def call(verb: str, payload):
    from rayreact import _api

    return _api._runtime().placement_group_call(verb, payload)
