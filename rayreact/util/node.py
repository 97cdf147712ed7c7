"""This node's address and instance id (``ray.util.get_node_ip_address``, ``get_node_instance_id``)."""

from __future__ import annotations

import os
import socket

_LOOPBACK = "127.0.0.1"


def get_node_ip_address(address: str = "8.8.8.8:53") -> str:
    """The IP address this machine uses to reach ``address`` (no packet is sent), as Ray reports it.

    ``RAY_NODE_IP_ADDRESS`` overrides it; with no route at all, the loopback address.
    """
    override = os.environ.get("RAY_NODE_IP_ADDRESS")
    if override:
        return override
    host, port = address.rsplit(":", 1)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, int(port)))  # UDP connect only picks the route
            return probe.getsockname()[0]
    except OSError:
        return _LOOPBACK


def get_node_instance_id() -> str:
    """The cloud instance id of this node; empty off the cloud (Ray reads ``RAY_CLOUD_INSTANCE_ID``)."""
    return os.environ.get("RAY_CLOUD_INSTANCE_ID", "")
