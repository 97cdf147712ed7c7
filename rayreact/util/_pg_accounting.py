"""Single-node resource accounting for tasks, actors and placement groups.

One ``ResourceLedger`` per session, owned by the scheduler, is the one record of
what the node has free. Plain tasks and actors take resources from the node. A
placement group reserves the sum of its bundles from the node as soon as it
fits (groups wait, in creation order, until it does); tasks and actors
scheduled into a group then take from one of its bundles, never from the node.
All strategies place every bundle on the one node, except ``STRICT_SPREAD``
with more than one bundle, which needs distinct nodes: like Ray on one node, it
stays pending for ever. So does a group whose bundles exceed the node.

Amounts are ``{resource name: float}`` with Ray's names ("CPU", "GPU",
"memory", custom). They are kept as integers of 1/10000 (Ray's granularity), so
fractions add up exactly. Every method is thread-safe.

Interface for the scheduler::

    ledger = ResourceLedger(total={"CPU": 2, "GPU": 0}, node_id=<hex>)
    ledger.check_request(demand, pg_id=None, bundle_index=-1, placement=None, what="f")
        # at submission: raises ValueError, with Ray's message, if the group's bundles can never hold the
        # request or the bundle index is out of range (Ray raises these from .remote())
    ledger.is_feasible(demand, pg_id=None, bundle_index=-1) -> bool
        # could fit once everything is free; if not, Ray warns and the request waits
    grant = ledger.try_acquire(demand, pg_id=None, bundle_index=-1, placement=None) -> Grant | None
        # None: not now (group not placed yet, or not enough free); retry after a change.
        # ``placement`` (default: ``demand``) must fit at this moment but is not held: a default
        # actor needs 1 CPU free to be placed and then holds 0.
    ledger.release(grant)           # idempotent; returns the amounts to the bundle or the node
    ledger.subscribe(callback)      # callback() (no lock held) after anything that may let a waiting
                                    # request fit: a release, a group placed or removed
    ledger.subscribe_evictions(callback)
                                    # callback(grants) (no lock held) when a group is removed with work
                                    # inside: the scheduler must kill those actors and tasks, as Ray does
    ledger.available_resources() / ledger.cluster_resources()
        # Ray's views, with its per-group names: CPU_group_<pgid>, CPU_group_<i>_<pgid>, bundle_group_...

Interface for ``rayreact.util.placement_group`` (reached through ``rayreact._api.resource_ledger()``)::

    ledger.create_group(pg_id, bundles, strategy="PACK", name="", namespace=None)
    ledger.remove_group(pg_id) -> list[Grant]
        # the grants still inside the group (also sent to subscribe_evictions); releasing them later
        # is a no-op
    ledger.wait_group(pg_id, timeout) -> bool            # True once placed, False on timeout
    ledger.group_state(pg_id) -> "PENDING" | "CREATED" | "REMOVED" | None
    ledger.group_bundles(pg_id) -> list[dict]
    ledger.group_by_name(name, namespace=None) -> pg_id | None
    ledger.table(pg_id=None) -> dict                     # placement_group_table()'s format

``pg_id`` is the placement group's hex id (a string).
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional

_SCALE = 10000  # Ray's resource granularity is 1/10000
_BUNDLE_SLOT = 1000 * _SCALE  # Ray's "bundle_group_*" pseudo-resource per bundle
_BUNDLE_SLOT_PER_GRANT = _SCALE // 1000  # each task or actor in a bundle takes 0.001 of it

PENDING, CREATED, REMOVED = "PENDING", "CREATED", "REMOVED"
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

Amounts = Dict[str, int]


def _to_units(amounts: Optional[Mapping[str, float]]) -> Amounts:
    return {k: int(round(v * _SCALE)) for k, v in (amounts or {}).items() if v}


def _to_floats(units: Amounts, drop_zero: bool = False) -> Dict[str, float]:
    return {k: v / _SCALE for k, v in units.items() if v or not drop_zero}


def _fits(need: Amounts, free: Amounts) -> bool:
    return all(free.get(k, 0) >= v for k, v in need.items())


def _take(pool: Amounts, amounts: Amounts) -> None:
    for k, v in amounts.items():
        pool[k] = pool.get(k, 0) - v


def _give(pool: Amounts, amounts: Amounts) -> None:
    for k, v in amounts.items():
        pool[k] = pool.get(k, 0) + v


def _sum(bundles: List[Amounts]) -> Amounts:
    total: Amounts = {}
    for b in bundles:
        _give(total, b)
    return total


@dataclass(eq=False)
class Grant:
    """Resources held by one running task or actor; hand it back to ``release``."""

    id: int
    amounts: Dict[str, float]
    pg_id: Optional[str] = None
    bundle_index: int = -1

    def __repr__(self):
        where = f" in {self.pg_id}[{self.bundle_index}]" if self.pg_id else ""
        return f"Grant({self.id}, {self.amounts}{where})"


@dataclass(eq=False)
class _Group:
    pg_id: str
    name: str
    namespace: Optional[str]
    strategy: str
    bundles: List[Amounts]  # sizes
    free: List[Amounts] = field(default_factory=list)  # what is left in each bundle
    grants: Dict[int, Grant] = field(default_factory=dict)
    state: str = PENDING
    created_at: float = field(default_factory=time.monotonic)
    creation_ms: float = 0.0

    def grants_in(self, index: int) -> int:
        return sum(1 for g in self.grants.values() if g.bundle_index == index)


class ResourceLedger:
    """The node's resources, the placement groups' reservations and the grants of running work."""

    def __init__(self, total: Mapping[str, float], node_id: str = "0" * 56):
        self.node_id = node_id
        self._total = _to_units(total)
        self._free = dict(self._total)
        self._groups: Dict[str, _Group] = {}  # creation order is placement order
        self._node_grants: Dict[int, Grant] = {}
        self._grant_units: Dict[int, Amounts] = {}
        self._ids = itertools.count(1)
        self._cond = threading.Condition(threading.RLock())
        self._listeners: List[Callable[[], None]] = []
        self._eviction_listeners: List[Callable[[List[Grant]], None]] = []

    # -- notification ---------------------------------------------------------------------

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every change that may let a waiting request fit."""
        self._listeners.append(callback)

    def subscribe_evictions(self, callback: Callable[[List[Grant]], None]) -> None:
        """Call ``callback(grants)`` when a removed group still held running work."""
        self._eviction_listeners.append(callback)

    def _changed(self) -> None:
        for callback in list(self._listeners):
            callback()

    # -- placement groups -----------------------------------------------------------------

    def create_group(self, pg_id: str, bundles: List[Mapping[str, float]], strategy: str = "PACK",
                     name: str = "", namespace: Optional[str] = None) -> None:
        """Register a group; it is placed now if the node has room, else when room frees up."""
        if strategy not in STRATEGIES:
            raise ValueError(f"Invalid placement group strategy {strategy}.")
        sizes = [_to_units(b) for b in bundles]
        with self._cond:
            if pg_id in self._groups:
                raise ValueError(f"Placement group {pg_id} already exists.")
            self._groups[pg_id] = _Group(pg_id, name, namespace, strategy, sizes)
            placed = self._place_pending_groups()
        if placed:
            self._changed()

    def _can_ever_place(self, group: _Group) -> bool:
        if group.strategy == "STRICT_SPREAD" and len(group.bundles) > 1:
            return False  # needs one node per bundle
        return _fits(_sum(group.bundles), self._total)

    def _place_pending_groups(self) -> bool:
        """Reserve every pending group that fits, oldest first; True if any was placed. Lock held."""
        placed = False
        for group in self._groups.values():
            if group.state != PENDING or not self._can_ever_place(group):
                continue
            need = _sum(group.bundles)
            if _fits(need, self._free):
                _take(self._free, need)
                group.free = [dict(b) for b in group.bundles]
                group.state = CREATED
                group.creation_ms = (time.monotonic() - group.created_at) * 1000
                placed = True
        if placed:
            self._cond.notify_all()
        return placed

    def remove_group(self, pg_id: str) -> List[Grant]:
        """Remove a group, returning its reservation to the node; returns the grants still inside it."""
        with self._cond:
            group = self._groups.get(pg_id)
            if group is None or group.state == REMOVED:
                return []
            evicted = list(group.grants.values())
            if group.state == CREATED:
                _give(self._free, _sum(group.bundles))
            for grant in evicted:
                self._grant_units.pop(grant.id, None)
            group.grants.clear()
            group.free = []
            group.state = REMOVED
            self._place_pending_groups()
            self._cond.notify_all()
        if evicted:
            for callback in list(self._eviction_listeners):
                callback(evicted)
        self._changed()
        return evicted

    def wait_group(self, pg_id: str, timeout: Optional[float]) -> bool:
        """Block until the group is placed (True) or ``timeout`` seconds pass (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                state = self.group_state(pg_id)
                if state == CREATED:
                    return True
                if state != PENDING:
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)

    def group_state(self, pg_id: str) -> Optional[str]:
        with self._cond:
            group = self._groups.get(pg_id)
            return group.state if group else None

    def group_bundles(self, pg_id: str) -> List[Dict[str, float]]:
        with self._cond:
            return [_to_floats(b) for b in self._group(pg_id).bundles]

    def group_by_name(self, name: str, namespace: Optional[str] = None) -> Optional[str]:
        """The live group of that name (and namespace, if given), or None."""
        with self._cond:
            for group in reversed(list(self._groups.values())):
                if group.name == name and group.state != REMOVED and (
                        namespace is None or group.namespace is None or group.namespace == namespace):
                    return group.pg_id
            return None

    def table(self, pg_id: Optional[str] = None) -> dict:
        """One group's state as ``placement_group_table(pg)`` returns it, or all of them by id."""
        with self._cond:
            if pg_id is not None:
                return self._describe(self._groups[pg_id]) if pg_id in self._groups else {}
            return {g.pg_id: self._describe(g) for g in self._groups.values()}

    def _describe(self, group: _Group) -> dict:
        if group.state == PENDING:
            scheduling = "NO_RESOURCES" if self._can_ever_place(group) else "INFEASIBLE"
        else:
            scheduling = "FINISHED" if group.state == CREATED else "REMOVED"
        placed = group.state != PENDING
        return {
            "placement_group_id": group.pg_id,
            "name": group.name,
            "bundles": {i: _to_floats(b) for i, b in enumerate(group.bundles)},
            "bundles_to_node_id": {i: self.node_id if placed else "" for i in range(len(group.bundles))},
            "strategy": group.strategy,
            "state": group.state,
            "stats": {
                "end_to_end_creation_latency_ms": round(group.creation_ms, 3) if placed else 0.0,
                "scheduling_latency_ms": round(group.creation_ms, 3) if placed else 0.0,
                "scheduling_attempt": 1,
                "highest_retry_delay_ms": 0.0,
                "scheduling_state": scheduling,
            },
        }

    def _group(self, pg_id: str) -> _Group:
        group = self._groups.get(pg_id)
        if group is None:
            raise ValueError(f"Placement group {pg_id} does not exist.")
        return group

    # -- tasks and actors -----------------------------------------------------------------

    def check_request(self, demand: Mapping[str, float], pg_id: Optional[str] = None, bundle_index: int = -1,
                      placement: Optional[Mapping[str, float]] = None, what: str = "the task") -> None:
        """Raise ``ValueError`` as Ray does at submission if the request can never use the group."""
        if pg_id is None:
            if bundle_index != -1:
                raise ValueError("If placement group is not set, the value of bundle index must be -1.")
            return
        with self._cond:
            sizes = self._group(pg_id).bundles
            if bundle_index >= len(sizes) or bundle_index < -1:
                raise ValueError(f"placement group bundle index {bundle_index} is invalid. "
                                 f"Valid placement group indexes: 0-{len(sizes)}")
            bundles = [_to_floats(b) for b in sizes]
            if not any(_fits(_to_units(demand), b) for b in sizes):
                raise ValueError(f"Cannot schedule {what} with the placement group because the resource request "
                                 f"{dict(demand)} cannot fit into any bundles for the placement group, {bundles}.")
            if placement is not None and not any(_fits(_to_units(placement), b) for b in sizes):
                raise ValueError(f"Cannot schedule {what} with the placement group because the actor requires "
                                 f"{placement.get('CPU', 0)} CPU for creation, but it cannot fit into any bundles "
                                 f"for the placement group, {bundles}. Consider creating a placement group with "
                                 f"CPU resources.")

    def is_feasible(self, demand: Mapping[str, float], pg_id: Optional[str] = None, bundle_index: int = -1) -> bool:
        """Whether the request could ever be granted (everything free, the group placed)."""
        need = _to_units(demand)
        with self._cond:
            if pg_id is None:
                return _fits(need, self._total)
            group = self._groups.get(pg_id)
            if group is None or group.state == REMOVED or not self._can_ever_place(group):
                return False
            return any(_fits(need, group.bundles[i]) for i in self._bundle_choices(group, bundle_index))

    @staticmethod
    def _bundle_choices(group: _Group, bundle_index: int) -> range:
        return range(len(group.bundles)) if bundle_index == -1 else range(bundle_index, bundle_index + 1)

    def try_acquire(self, demand: Mapping[str, float], pg_id: Optional[str] = None, bundle_index: int = -1,
                    placement: Optional[Mapping[str, float]] = None) -> Optional[Grant]:
        """Take ``demand`` from the node, or from a bundle of the group; None if it does not fit now."""
        need = _to_units(demand)
        must_fit = dict(need) if placement is None else _to_units(placement)
        for k, v in need.items():
            must_fit[k] = max(must_fit.get(k, 0), v)
        with self._cond:
            if pg_id is None:
                if not _fits(must_fit, self._free):
                    return None
                _take(self._free, need)
                grant = Grant(next(self._ids), _to_floats(need))
                self._node_grants[grant.id] = grant
            else:
                group = self._groups.get(pg_id)
                if group is None or group.state != CREATED:
                    return None
                index = next((i for i in self._bundle_choices(group, bundle_index)
                              if _fits(must_fit, group.free[i])), None)
                if index is None:
                    return None
                _take(group.free[index], need)
                grant = Grant(next(self._ids), _to_floats(need), pg_id, index)
                group.grants[grant.id] = grant
            self._grant_units[grant.id] = need
            return grant

    def release(self, grant: Grant) -> None:
        """Give a grant's resources back; a second release, or one after its group was removed, is a no-op."""
        with self._cond:
            units = self._grant_units.pop(grant.id, None)
            if units is None:
                return
            if grant.pg_id is None:
                self._node_grants.pop(grant.id, None)
                _give(self._free, units)
                self._place_pending_groups()
            else:
                group = self._groups[grant.pg_id]
                group.grants.pop(grant.id, None)
                _give(group.free[grant.bundle_index], units)
        self._changed()

    # -- views ----------------------------------------------------------------------------

    def total(self) -> Dict[str, float]:
        return _to_floats(self._total)

    def available_resources(self) -> Dict[str, float]:
        """Free resources as Ray's ``available_resources()`` shows them (zero entries dropped)."""
        with self._cond:
            view = _to_floats(self._free, drop_zero=True)
            for group in self._groups.values():
                if group.state == CREATED:
                    slots = [_BUNDLE_SLOT - _BUNDLE_SLOT_PER_GRANT * group.grants_in(i)
                             for i in range(len(group.bundles))]
                    view.update(self._group_view(group.pg_id, group.free, slots, drop_zero=True))
            return view

    def cluster_resources(self) -> Dict[str, float]:
        """Total resources as Ray's ``cluster_resources()`` shows them, group resources included."""
        with self._cond:
            view = _to_floats(self._total, drop_zero=True)
            for group in self._groups.values():
                if group.state == CREATED:
                    view.update(self._group_view(group.pg_id, group.bundles, [_BUNDLE_SLOT] * len(group.bundles),
                                                 drop_zero=False))
            return view

    @staticmethod
    def _group_view(pg_id: str, per_bundle: List[Amounts], slots: List[int], drop_zero: bool) -> Dict[str, float]:
        units: Amounts = {}
        for i, (amounts, slot) in enumerate(zip(per_bundle, slots)):
            for name, value in list(amounts.items()) + [("bundle", slot)]:
                units[f"{name}_group_{i}_{pg_id}"] = value
                units[f"{name}_group_{pg_id}"] = units.get(f"{name}_group_{pg_id}", 0) + value
        return _to_floats(units, drop_zero=drop_zero)
