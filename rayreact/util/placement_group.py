"""Placement groups on one node: named reservations of resources, in bundles.

Same API as ``ray.util.placement_group`` in Ray 2.60. Creating a group
reserves the sum of its bundles from the node (at once if they fit, otherwise
as soon as they do); tasks and actors run in it with
``scheduling_strategy=PlacementGroupSchedulingStrategy(pg, bundle_index)`` and
take their resources from a bundle. The bookkeeping is
``rayreact.core.pg_accounting.ResourceLedger``, owned by the core's scheduler;
this module validates and forwards requests to it. For the core's ``.remote()``
there are Ray's submission checks, ``check_placement_group_index`` and
``_validate_resource_shape``, so that a request no bundle can hold fails at once.
"""

from __future__ import annotations

import time
import warnings
from typing import Dict, List, Optional, Union

from ._pg_calls import call

VALID_PLACEMENT_GROUP_STRATEGIES = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}
NODE_ID_LABEL_KEY = "ray.io/node-id"


class PlacementGroup:
    """A handle to a placement group; picklable, so tasks and actors can receive it."""

    @staticmethod
    def empty() -> "PlacementGroup":
        import rayreact as ray

        return PlacementGroup(ray.PlacementGroupID.nil())

    def __init__(self, id, bundle_cache: Optional[List[Dict]] = None):
        self.id = id
        self.bundle_cache = bundle_cache

    @property
    def is_empty(self) -> bool:
        return self.id.is_nil()

    def ready(self):
        """An ObjectRef that resolves to this group once all its bundles are reserved."""
        import rayreact as ray

        if self.is_empty:
            return ray.put(self)
        from .scheduling_strategies import PlacementGroupSchedulingStrategy

        # A resource-free task in the group runs only once the group is placed.
        probe = _ready_probe().options(scheduling_strategy=PlacementGroupSchedulingStrategy(self))
        return probe.remote(self)

    def wait(self, timeout_seconds: Union[float, int] = 30) -> bool:
        """Wait up to ``timeout_seconds`` for the group to be placed; True if it is."""
        # Polls the ledger rather than waiting on ready(): a probe task for a group that is never
        # placed would stay queued for ever.
        deadline = time.monotonic() + timeout_seconds
        pause = 0.001
        while True:
            state = call("state", self.id.binary())
            if state == "CREATED":
                return True
            if state != "PENDING":
                raise Exception(f"Placement group {self.id!r} does not exist.")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.05)

    @property
    def bundle_specs(self) -> List[Dict]:
        """The bundles, as ``{resource: amount}`` dicts."""
        self._fill_bundle_cache_if_needed()
        return self.bundle_cache

    @property
    def bundle_count(self) -> int:
        self._fill_bundle_cache_if_needed()
        return len(self.bundle_cache)

    def _fill_bundle_cache_if_needed(self) -> None:
        if not self.bundle_cache:
            self.bundle_cache = call("bundles", self.id.binary())

    def __eq__(self, other):
        return isinstance(other, PlacementGroup) and self.id == other.id

    def __hash__(self):
        return hash(self.id)


def _return_group(pg):
    return pg


_probe = None


def _ready_probe():
    global _probe
    if _probe is None:
        import rayreact as ray

        _probe = ray.remote(num_cpus=0)(_return_group)
    return _probe


def placement_group(
    bundles: List[Dict[str, float]],
    strategy: Optional[str] = None,
    name: str = "",
    lifetime: Optional[str] = None,
    _soft_target_node_id: Optional[str] = None,
    bundle_label_selector: List[Dict[str, str]] = None,
    topology_strategy: Optional[Dict[str, str]] = None,
) -> PlacementGroup:
    """Create a placement group (asynchronously: use ``ready()`` or ``wait()`` to know it is placed).

    Args:
        bundles: the resource dicts to reserve, e.g. ``[{"CPU": 1}, {"GPU": 1}]``.
        strategy: "PACK" (default), "SPREAD", "STRICT_PACK" or "STRICT_SPREAD". On one
            node all place the bundles here, except "STRICT_SPREAD" with more than one
            bundle, which never fits (as in Ray).
        name: a name for ``get_placement_group``.
        lifetime: None or "detached".
        bundle_label_selector: per-bundle node label selectors.
        topology_strategy: ``{label: strategy}``, instead of ``strategy``.
    """
    import rayreact as ray

    validate_placement_group(bundles, strategy, lifetime, _soft_target_node_id, bundle_label_selector,
                             topology_strategy)
    pg_id = ray.PlacementGroupID.from_random()
    namespace = ray.get_runtime_context().namespace
    call("create", (pg_id.binary(), bundles, _node_level_strategy(strategy, topology_strategy), name, namespace))
    return PlacementGroup(pg_id, bundle_cache=[{k: float(v) for k, v in b.items()} for b in bundles])


def remove_placement_group(placement_group: PlacementGroup) -> None:
    """Remove the group: its reservation returns to the node; actors and tasks in it are killed."""
    assert placement_group is not None
    call("remove", placement_group.id.binary())


def get_placement_group(placement_group_name: str) -> PlacementGroup:
    """The live placement group with this name in the current namespace; ``ValueError`` if none."""
    import rayreact as ray

    if not placement_group_name:
        raise ValueError("Please supply a non-empty value to get_placement_group")
    pg_id = call("by_name", (placement_group_name, ray.get_runtime_context().namespace))
    if pg_id is None:
        raise ValueError(f"Failed to look up placement group with name: {placement_group_name}")
    return PlacementGroup(ray.PlacementGroupID(pg_id))


def placement_group_table(placement_group: PlacementGroup = None) -> dict:
    """The state of one group, or of all groups keyed by hex id."""
    return call("table", placement_group.id.binary() if placement_group is not None else None)


def get_current_placement_group() -> Optional[PlacementGroup]:
    """The group the calling task or actor runs in; None in the driver or outside any group."""
    import rayreact as ray

    pg_hex = ray.get_runtime_context().get_placement_group_id()
    if not pg_hex:
        return None
    pg_id = ray.PlacementGroupID.from_hex(pg_hex)
    return None if pg_id.is_nil() else PlacementGroup(pg_id)


def check_placement_group_index(placement_group: PlacementGroup, bundle_index: int) -> None:
    """``ValueError`` unless ``bundle_index`` is -1 or a bundle of the group."""
    assert placement_group is not None
    if placement_group.id.is_nil():
        if bundle_index != -1:
            raise ValueError("If placement group is not set, the value of bundle index must be -1.")
    elif bundle_index >= placement_group.bundle_count or bundle_index < -1:
        raise ValueError(f"placement group bundle index {bundle_index} is invalid. Valid placement group indexes: "
                         f"0-{placement_group.bundle_count}")


def _fits_some_bundle(resources: Dict[str, float], bundles: List[Dict[str, float]]) -> bool:
    return any(all(bundle.get(k, 0) >= v for k, v in resources.items() if not k.startswith("bundle"))
               for bundle in bundles)


def _validate_resource_shape(placement_group: PlacementGroup, resources: Dict[str, float],
                             placement_resources: Dict[str, float], task_or_actor_repr: str) -> None:
    """``ValueError``, as Ray raises it from ``.remote()``, if no bundle could ever hold the request.

    ``placement_resources`` is what an actor needs free to be placed (Ray: 1 CPU by default).
    """
    bundles = placement_group.bundle_specs
    if not _fits_some_bundle(resources, bundles):
        raise ValueError(f"Cannot schedule {task_or_actor_repr} with the placement group because the resource "
                         f"request {resources} cannot fit into any bundles for the placement group, {bundles}.")
    if not _fits_some_bundle(placement_resources, bundles):
        raise ValueError(f"Cannot schedule {task_or_actor_repr} with the placement group because the actor "
                         f"requires {placement_resources.get('CPU', 0)} CPU for creation, but it cannot fit into "
                         f"any bundles for the placement group, {bundles}. Consider creating a placement group "
                         "with CPU resources.")


def _node_level_strategy(strategy: Optional[str], topology_strategy: Optional[Dict[str, str]]) -> str:
    if topology_strategy is not None:
        return topology_strategy.get(NODE_ID_LABEL_KEY, "PACK")
    return strategy if strategy is not None else "PACK"


def validate_placement_group(bundles, strategy=None, lifetime=None, _soft_target_node_id=None,
                             bundle_label_selector=None, topology_strategy=None) -> bool:
    """Raise ``ValueError`` for arguments Ray refuses."""
    if topology_strategy is not None and strategy is not None:
        raise ValueError("`strategy` and `topology_strategy` cannot both be specified. Pass node-level packing "
                         f"via `topology_strategy['{NODE_ID_LABEL_KEY}']`.")
    if strategy is not None and strategy not in VALID_PLACEMENT_GROUP_STRATEGIES:
        raise ValueError(f"Invalid placement group strategy {strategy}. "
                         f"Supported strategies are: {VALID_PLACEMENT_GROUP_STRATEGIES}.")
    if topology_strategy is not None:
        _validate_topology_strategy(topology_strategy)
    level = _node_level_strategy(strategy, topology_strategy)
    if _soft_target_node_id and level != "STRICT_PACK":
        raise ValueError(f"_soft_target_node_id currently only works with STRICT_PACK but got {level}")
    if _soft_target_node_id:
        from .scheduling_strategies import _is_valid_node_hex

        if not _is_valid_node_hex(_soft_target_node_id):
            raise ValueError(f"Invalid hex ID of _soft_target_node_id, got {_soft_target_node_id}")
    _validate_bundles(bundles)
    if bundle_label_selector is not None:
        if len(bundles) != len(bundle_label_selector):
            raise ValueError(f"Invalid bundle label selector {bundle_label_selector}. The length of "
                             "`bundle_label_selector` should equal the length of `bundles`.")
        for selector in bundle_label_selector:
            if not isinstance(selector, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
                raise ValueError("Bundle label selector must be a list of string dictionary label selectors. For "
                                 'example: `[{ray.io/market_type": "spot"}, {"ray.io/accelerator-type": "A100"}]`.')
    if lifetime not in (None, "detached"):
        raise ValueError(f"Placement group `lifetime` argument must be either `None` or 'detached'. Got {lifetime}.")
    return True


def _validate_topology_strategy(topology_strategy: Dict[str, str]) -> None:
    if not isinstance(topology_strategy, dict):
        raise ValueError(f"`topology_strategy` must be a dict, got {type(topology_strategy).__name__}.")
    if len(topology_strategy) > 2:
        raise ValueError(f"`topology_strategy` must contain 0, 1, or 2 entries: `{NODE_ID_LABEL_KEY}` plus an "
                         f"optional topology label. Got {len(topology_strategy)} entries.")
    labels = []
    for key, value in topology_strategy.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"`topology_strategy` keys must be non-empty strings, got {key!r}.")
        if value not in VALID_PLACEMENT_GROUP_STRATEGIES:
            raise ValueError(f"Invalid topology strategy {value!r} for label {key!r}. "
                             f"Supported strategies are: {VALID_PLACEMENT_GROUP_STRATEGIES}.")
        if key != NODE_ID_LABEL_KEY:
            labels.append(key)
            if value != "STRICT_PACK":
                raise ValueError(f"Topology strategy {value!r} for label {key!r} is not supported yet; only "
                                 f"'STRICT_PACK' is supported for topology labels other than `{NODE_ID_LABEL_KEY}` "
                                 "for now.")
    if len(labels) > 1:
        raise ValueError(f"`topology_strategy` currently supports at most one topology label other than "
                         f"`{NODE_ID_LABEL_KEY}`. Got {labels}.")


def _validate_bundles(bundles: List[Dict[str, float]]) -> None:
    if not isinstance(bundles, list):
        raise ValueError(f"Placement group bundles must be a list, got {type(bundles)}.")
    if not bundles:
        raise ValueError('Bundles must be a non-empty list of resource dictionaries. For example: '
                         '`[{"CPU": 1.0}, {"GPU": 1.0}]`. Got empty list instead.')
    for bundle in bundles:
        if not isinstance(bundle, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) for k, v in bundle.items()):
            raise ValueError('Bundles must be a non-empty list of resource dictionaries. For example: '
                             '`[{"CPU": 1.0}, {"GPU": 1.0}]`.')
        if not bundle or all(v == 0 for v in bundle.values()):
            raise ValueError(f"Bundles cannot be an empty dictionary or resources with only 0 values. "
                             f"Bundles: {bundles}")
        if "object_store_memory" in bundle:
            warnings.warn("Setting 'object_store_memory' for bundles is deprecated since it doesn't actually "
                          "reserve the required object store memory.", DeprecationWarning, stacklevel=3)
