"""Scheduling strategies for ``.options(scheduling_strategy=...)``, as in ``ray.util.scheduling_strategies``.

These are plain records read by the core's scheduler. On one node,
``NodeAffinitySchedulingStrategy`` to this node, "DEFAULT" and "SPREAD" all
mean "here"; an affinity to a node that does not exist fails unless ``soft``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Union

if TYPE_CHECKING:
    from rayreact.util.placement_group import PlacementGroup

_NODE_ID_HEX_LEN = 56  # node ids are 28 bytes, as in Ray


class PlacementGroupSchedulingStrategy:
    """Run the task or actor in a placement group.

    Args:
        placement_group: the group, or None for none.
        placement_group_bundle_index: the bundle to use; -1 for any bundle with room.
        placement_group_capture_child_tasks: whether tasks and actors started by
            this one are placed in the same group by default (False if None).
    """

    def __init__(self, placement_group: "PlacementGroup", placement_group_bundle_index: int = -1,
                 placement_group_capture_child_tasks: Optional[bool] = None):
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks


def _is_valid_node_hex(node_id: str) -> bool:
    if len(node_id) != _NODE_ID_HEX_LEN:
        return False
    try:
        raw = bytes.fromhex(node_id)
    except ValueError:
        return False
    return raw != b"\xff" * len(raw)  # the nil id names no node


class NodeAffinitySchedulingStrategy:
    """Run the task or actor on the node with this hex id.

    Args:
        node_id: the node's hex id (see ``nodes()``), or an id object with ``hex()``.
        soft: if the node does not exist or cannot ever fit the request, run
            elsewhere instead of failing.
    """

    def __init__(self, node_id: str, soft: bool, _spill_on_unavailable: bool = False,
                 _fail_on_unavailable: bool = False):
        if not isinstance(node_id, str):
            node_id = node_id.hex()
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable
        self._validate_attributes()

    def _validate_attributes(self):
        if not _is_valid_node_hex(self.node_id):
            raise ValueError(
                f"Invalid node_id '{self.node_id}'. Node ID must be a valid hex string. To get a list of all nodes "
                "and their IDs in your cluster, use ray.nodes(). See "
                "https://docs.ray.io/en/latest/ray-core/miscellaneous.html#node-information for more details.")
        if self._spill_on_unavailable and not self.soft:
            raise ValueError("_spill_on_unavailable cannot be set when soft is False. Please set soft to True to "
                             "use _spill_on_unavailable.")
        if self._fail_on_unavailable and self.soft:
            raise ValueError("_fail_on_unavailable cannot be set when soft is True. Please set soft to False to "
                             "use _fail_on_unavailable.")


def _check_operator_values(values, operator: str) -> None:
    if not values:
        raise ValueError(f"The variadic parameter of the {operator} operator must be a non-empty tuple: "
                         f'e.g. {operator}("value1", "value2").')
    for position, value in enumerate(values):
        if not isinstance(value, str):
            raise ValueError(f"Type of value in position {position} for the {operator} operator must be str "
                             f'(e.g. {operator}("value1", "value2")) but got {value} of type {type(value)}.')


class In:
    """Label value is one of ``values``."""

    def __init__(self, *values):
        _check_operator_values(values, "In")
        self.values = list(values)


class NotIn:
    """Label value is none of ``values``."""

    def __init__(self, *values):
        _check_operator_values(values, "NotIn")
        self.values = list(values)


class Exists:
    """The label is set."""


class DoesNotExist:
    """The label is not set."""


class _LabelMatchExpression:
    """One ``key: operator`` condition on a node's labels."""

    def __init__(self, key: str, operator: Union[In, NotIn, Exists, DoesNotExist]):
        self.key = key
        self.operator = operator


LabelMatchExpressionsT = Dict[str, Union[In, NotIn, Exists, DoesNotExist]]


def _to_expressions(conditions: Optional[LabelMatchExpressionsT], param: str) -> list:
    if conditions is None:
        return []
    if not isinstance(conditions, dict):
        raise ValueError(f'The {param} parameter must be a map (e.g. {{"key1": In("value1")}}) '
                         f"but got type {type(conditions)}.")
    expressions = []
    for key, operator in conditions.items():
        if not isinstance(key, str):
            raise ValueError(f"The map key of the {param} parameter must be of type str "
                             f'(e.g. {{"key1": In("value1")}}) but got {key} of type {type(key)}.')
        if not isinstance(operator, (In, NotIn, Exists, DoesNotExist)):
            raise ValueError(f"The map value for key {key} of the {param} parameter must be one of the `In`, "
                             f'`NotIn`, `Exists` or `DoesNotExist` operator (e.g. {{"key1": In("value1")}}) '
                             f"but got {operator} of type {type(operator)}.")
        expressions.append(_LabelMatchExpression(key, operator))
    return expressions


class NodeLabelSchedulingStrategy:
    """Run on a node whose labels match ``hard`` (and preferably ``soft``)."""

    def __init__(self, hard: LabelMatchExpressionsT, *, soft: LabelMatchExpressionsT = None):
        self.hard = _to_expressions(hard, "hard")
        self.soft = _to_expressions(soft, "soft")
        if not (self.hard or self.soft):
            raise ValueError("The `hard` and `soft` parameter of NodeLabelSchedulingStrategy cannot both be empty.")


SchedulingStrategyT = Union[
    None,
    str,  # "DEFAULT" or "SPREAD"
    PlacementGroupSchedulingStrategy,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
]
