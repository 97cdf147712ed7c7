"""``connect``/``disconnect`` (Ray Client, ``ray.util.connect``): attach to a remote Ray cluster.

A remote cluster is real Ray's business: ``connect`` starts a session with a
``ray://`` address, which rayreact's ``init`` hands to real Ray.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


def connect(conn_str: str, secure: bool = False, metadata=None, connection_retries: int = 3,
            job_config=None, namespace: Optional[str] = None, *, ignore_version: bool = False,
            _credentials=None, ray_init_kwargs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Connect to the Ray Client server at ``conn_str`` ("host:port")."""
    import rayreact as ray

    if ray.is_initialized():
        raise RuntimeError("Ray Client is already connected. Maybe you called ray.init(\"ray://<address>\") "
                           "twice by accident?")
    address = conn_str if conn_str.startswith("ray://") else f"ray://{conn_str}"
    kwargs = dict(ray_init_kwargs or {})
    if namespace is not None:
        kwargs["namespace"] = namespace
    context = ray.init(address=address, **kwargs)
    return getattr(context, "address_info", {}) or {}


def disconnect() -> None:
    """Leave the cluster (ends the session)."""
    import rayreact as ray

    ray.shutdown()
