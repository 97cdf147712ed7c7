"""``rayreact.util``: the utilities of ``ray.util``, built on rayreact's public API.

Everything here imports the top-level ``rayreact`` only when called, so it
works whichever backend stands behind it and importing it starts nothing.
Submodules as in Ray: ``actor_pool``, ``queue``, ``multiprocessing``,
``placement_group``, ``scheduling_strategies``, ``helpers``, ``debug``,
``annotations``, ``serialization``, ``check_serialize``, ``accelerators``,
``metrics``.
"""

from rayreact.util import accelerators
from rayreact.util import debugpy as ray_debugpy
from rayreact.util import rpdb as pdb
from rayreact.util.actor_pool import ActorPool
from rayreact.util.annotations import PublicAPI
from rayreact.util.check_serialize import inspect_serializability
from rayreact.util.client_connect import connect, disconnect
from rayreact.util.debug import disable_log_once_globally, enable_periodic_logging, log_once
from rayreact.util.helpers import as_completed, map_unordered
from rayreact.util.named_actors import list_named_actors
from rayreact.util.node import get_node_instance_id, get_node_ip_address
from rayreact.util.placement_group import (
    get_current_placement_group,
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from rayreact.util.serialization import deregister_serializer, register_serializer

__all__ = [
    "accelerators",
    "ActorPool",
    "as_completed",
    "disable_log_once_globally",
    "enable_periodic_logging",
    "log_once",
    "pdb",
    "placement_group",
    "placement_group_table",
    "get_placement_group",
    "get_current_placement_group",
    "get_node_instance_id",
    "get_node_ip_address",
    "map_unordered",
    "remove_placement_group",
    "ray_debugpy",
    "inspect_serializability",
    "connect",
    "disconnect",
    "register_serializer",
    "deregister_serializer",
    "list_named_actors",
]
