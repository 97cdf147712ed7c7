"""Single-node resource accounting for placement groups.

The scheduler keeps the node's resources in two float dicts, ``total`` and
``available``, and takes plain tasks' and actors' resources from
``available``. A ``ResourceLedger`` shares those dicts: a placement group
reserves the sum of its bundles from ``available`` as soon as it fits (pending
groups are placed oldest first), and tasks and actors scheduled into a group
take from one of its bundles instead, never from the node. Every strategy puts
all bundles on the one node, except ``STRICT_SPREAD`` with more than one
bundle, which needs one node per bundle: like Ray on one node, that group
stays pending for ever. So does a group whose bundles exceed the node.

Not thread-safe: the scheduler calls it under its own lock.

Interface (``pg_id`` is the group id's bytes, ``pg.id.binary()``; amounts are
``{resource name: float}`` in Ray's names)::

    ledger = ResourceLedger(node)   # node: an object with ``total`` and ``available`` dicts (the
                                    # scheduler), or a plain mapping of totals for a ledger of its own

    # scheduler, for a task or actor with scheduling_strategy=PlacementGroupSchedulingStrategy(pg, index)
    ledger.can_acquire(pg_id, index, demand) -> bool  # False while the group is pending or full
    ledger.acquire(pg_id, index, demand) -> int       # takes from a bundle; returns the bundle used
    ledger.release(pg_id, bundle, demand)             # gives back; a no-op once the group is removed
    ledger.is_feasible(pg_id, index, demand) -> bool  # could ever fit; if not, warn and let it wait
    ledger.place_pending() -> bool                    # retry pending groups (call after node
                                                      # resources were released); True if one was placed
    ledger.members(pg_id) -> int                      # tasks/actors now holding a grant in the group
    ledger.bundles_of(pg_id) -> [dict] | None         # the bundle sizes (None: no such group); places nothing
    ledger.resource_view("total" | "available") -> dict
        # the group entries Ray adds to cluster_resources()/available_resources():
        # CPU_group_<pghex>, CPU_group_<i>_<pghex>, bundle_group_<pghex>, bundle_group_<i>_<pghex>

    # rayreact.util.placement_group, through runtime.placement_group_call(verb, payload) -> handle()
    ledger.handle(verb, payload)
        "create"  (pg_id, bundles, strategy, name, namespace) -> None
        "remove"  pg_id -> None     # the scheduler must then kill the group's actors and tasks, as Ray does
        "state"   pg_id -> "PENDING" | "CREATED" | "REMOVED" | None
        "bundles" pg_id -> [dict]
        "by_name" (name, namespace) -> pg_id | None
        "table"   pg_id | None -> dict in placement_group_table()'s format (all groups by hex id for None)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

PENDING, CREATED, REMOVED = "PENDING", "CREATED", "REMOVED"
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

_EPS = 1e-9  # the scheduler's float tolerance
_BUNDLE_SLOT = 1000.0  # Ray's "bundle_group_*" pseudo-resource per bundle...
_SLOT_PER_MEMBER = 0.001  # ...of which each task or actor in the bundle takes this much

Amounts = Dict[str, float]


def _fits(need: Mapping[str, float], free: Mapping[str, float]) -> bool:
    return all(free.get(k, 0.0) + _EPS >= v for k, v in need.items() if v)


def _take(pool: Amounts, amounts: Mapping[str, float]) -> None:
    for k, v in amounts.items():
        if v:
            pool[k] = pool.get(k, 0.0) - v


def _give(pool: Amounts, amounts: Mapping[str, float]) -> None:
    for k, v in amounts.items():
        if v:
            pool[k] = pool.get(k, 0.0) + v


def _sum(bundles: List[Amounts]) -> Amounts:
    total: Amounts = {}
    for bundle in bundles:
        _give(total, bundle)
    return total


class _OwnNode:
    """The node of a stand-alone ledger (tests, tools): its own ``total``/``available``."""

    def __init__(self, total: Mapping[str, float]):
        self.total = {k: float(v) for k, v in total.items()}
        self.available = dict(self.total)


@dataclass(eq=False)
class _Group:
    pg_id: bytes
    name: str
    namespace: Optional[str]
    strategy: str
    bundles: List[Amounts]  # sizes
    free: List[Amounts] = field(default_factory=list)  # what is left of each bundle once placed
    members: List[int] = field(default_factory=list)  # tasks/actors holding a grant, per bundle
    state: str = PENDING
    submitted_at: float = field(default_factory=time.monotonic)
    placement_ms: float = 0.0


class ResourceLedger:
    """Placement groups' reservations out of the node's resources, and their bundles' grants."""

    def __init__(self, node):
        self._node = _OwnNode(node) if isinstance(node, Mapping) else node
        self._groups: Dict[bytes, _Group] = {}  # insertion order is placement order

    # -- requests from the placement-group API ------------------------------------------

    def handle(self, verb: str, payload):
        """One request of ``rayreact.util.placement_group`` (see the module docstring)."""
        self.place_pending()
        if verb == "create":
            self.create(*payload)
        elif verb == "remove":
            self.remove(payload)
        elif verb == "state":
            group = self._groups.get(payload)
            return group.state if group else None
        elif verb == "bundles":
            return [dict(b) for b in self._group(payload).bundles]
        elif verb == "by_name":
            return self.by_name(*payload)
        elif verb == "table":
            return self.table(payload)
        else:
            raise ValueError(f"unknown placement group request {verb!r}")
        return None

    def create(self, pg_id: bytes, bundles: List[Mapping[str, float]], strategy: str = "PACK", name: str = "",
               namespace: Optional[str] = None) -> None:
        """Register a group; it is placed now if the node has room, else once it has."""
        if strategy not in STRATEGIES:
            raise ValueError(f"Invalid placement group strategy {strategy}.")
        if pg_id in self._groups:
            raise ValueError(f"Placement group {pg_id.hex()} already exists.")
        sizes = [{k: float(v) for k, v in b.items() if v} for b in bundles]
        self._groups[pg_id] = _Group(pg_id, name, namespace, strategy, sizes)
        self.place_pending()

    def remove(self, pg_id: bytes) -> None:
        """Return the group's reservation to the node; later releases into it are no-ops."""
        group = self._groups.get(pg_id)
        if group is None or group.state == REMOVED:
            return
        if group.state == CREATED:
            _give(self._node.available, _sum(group.bundles))
        group.state = REMOVED
        group.free, group.members = [], []
        self.place_pending()

    def by_name(self, name: str, namespace: Optional[str] = None) -> Optional[bytes]:
        """The newest live group with this name (in ``namespace``, if given)."""
        for group in reversed(list(self._groups.values())):
            if group.name == name and group.state != REMOVED and (
                    namespace is None or group.namespace is None or group.namespace == namespace):
                return group.pg_id
        return None

    def table(self, pg_id: Optional[bytes] = None) -> dict:
        """``placement_group_table()``: one group's record, or every group's by hex id."""
        if pg_id is not None:
            return self._describe(self._groups[pg_id]) if pg_id in self._groups else {}
        return {g.pg_id.hex(): self._describe(g) for g in self._groups.values()}

    def _describe(self, group: _Group) -> dict:
        placed = group.state != PENDING
        if placed:
            scheduling = "FINISHED" if group.state == CREATED else "REMOVED"
        else:
            scheduling = "NO_RESOURCES" if self._can_ever_place(group) else "INFEASIBLE"
        node = getattr(self._node, "node_id", b"")
        node_hex = node.hex() if isinstance(node, bytes) else str(node)
        latency = round(group.placement_ms, 3) if placed else 0.0
        return {
            "placement_group_id": group.pg_id.hex(),
            "name": group.name,
            "bundles": {i: dict(b) for i, b in enumerate(group.bundles)},
            "bundles_to_node_id": {i: node_hex if placed else "" for i in range(len(group.bundles))},
            "strategy": group.strategy,
            "state": group.state,
            "stats": {
                "end_to_end_creation_latency_ms": latency,
                "scheduling_latency_ms": latency,
                "scheduling_attempt": 1,
                "highest_retry_delay_ms": 0.0,
                "scheduling_state": scheduling,
            },
        }

    def _group(self, pg_id: bytes) -> _Group:
        group = self._groups.get(pg_id)
        if group is None:
            raise ValueError(f"Placement group {pg_id.hex()} does not exist.")
        return group

    # -- placing groups -----------------------------------------------------------------

    def _can_ever_place(self, group: _Group) -> bool:
        if group.strategy == "STRICT_SPREAD" and len(group.bundles) > 1:
            return False  # needs one node per bundle
        return _fits(_sum(group.bundles), self._node.total)

    def place_pending(self) -> bool:
        """Reserve every pending group that fits now, oldest first; True if any was placed."""
        placed = False
        for group in self._groups.values():
            if group.state != PENDING or not self._can_ever_place(group):
                continue
            need = _sum(group.bundles)
            if _fits(need, self._node.available):
                _take(self._node.available, need)
                group.free = [dict(b) for b in group.bundles]
                group.members = [0] * len(group.bundles)
                group.state = CREATED
                group.placement_ms = (time.monotonic() - group.submitted_at) * 1000
                placed = True
        return placed

    # -- tasks and actors in groups -----------------------------------------------------

    def _bundle_for(self, group: _Group, index: int, demand: Mapping[str, float]) -> Optional[int]:
        choices = range(len(group.bundles)) if index == -1 else [index]
        return next((i for i in choices if 0 <= i < len(group.free) and _fits(demand, group.free[i])), None)

    def can_acquire(self, pg_id: bytes, index: int, demand: Mapping[str, float]) -> bool:
        """Whether ``demand`` fits bundle ``index`` (-1: any bundle) of the placed group now."""
        self.place_pending()
        group = self._groups.get(pg_id)
        return group is not None and group.state == CREATED and self._bundle_for(group, index, demand) is not None

    def acquire(self, pg_id: bytes, index: int, demand: Mapping[str, float]) -> int:
        """Take ``demand`` from a bundle (``can_acquire`` must be true); returns the bundle's index."""
        group = self._group(pg_id)
        bundle = self._bundle_for(group, index, demand) if group.state == CREATED else None
        if bundle is None:
            raise ValueError(f"{dict(demand)} does not fit bundle {index} of placement group {pg_id.hex()} now")
        _take(group.free[bundle], demand)
        group.members[bundle] += 1
        return bundle

    def release(self, pg_id: bytes, bundle: int, demand: Mapping[str, float]) -> None:
        """Give back what ``acquire`` took from ``bundle``; a no-op if the group was removed."""
        group = self._groups.get(pg_id)
        if group is None or group.state != CREATED:
            return
        _give(group.free[bundle], demand)
        group.members[bundle] -= 1

    def is_feasible(self, pg_id: bytes, index: int, demand: Mapping[str, float]) -> bool:
        """Whether the request could ever be granted (all bundles empty, the group placed)."""
        group = self._groups.get(pg_id)
        if group is None or group.state == REMOVED or not self._can_ever_place(group):
            return False
        choices = range(len(group.bundles)) if index == -1 else [index]
        return any(0 <= i < len(group.bundles) and _fits(demand, group.bundles[i]) for i in choices)

    def bundles_of(self, pg_id: bytes) -> Optional[List[Amounts]]:
        """The group's bundle sizes (not copies), or None for a group never created; places nothing."""
        group = self._groups.get(pg_id)
        return None if group is None else group.bundles

    def members(self, pg_id: bytes) -> int:
        group = self._groups.get(pg_id)
        return sum(group.members) if group is not None and group.state == CREATED else 0

    # -- Ray's resource names for groups --------------------------------------------------

    def resource_view(self, which: str) -> Dict[str, float]:
        """The group entries of ``cluster_resources()`` ("total") or ``available_resources()``."""
        view: Dict[str, float] = {}
        for group in self._groups.values():
            if group.state != CREATED:
                continue
            pg_hex = group.pg_id.hex()
            for i, size in enumerate(group.bundles):
                amounts = dict(size if which == "total" else group.free[i])
                amounts["bundle"] = _BUNDLE_SLOT - (0 if which == "total" else _SLOT_PER_MEMBER * group.members[i])
                for name, value in amounts.items():
                    view[f"{name}_group_{i}_{pg_hex}"] = value
                    view[f"{name}_group_{pg_hex}"] = view.get(f"{name}_group_{pg_hex}", 0.0) + value
        if which != "total":
            view = {k: v for k, v in view.items() if v > _EPS}
        return view
