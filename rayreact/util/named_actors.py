"""``list_named_actors``: the names of live named actors (``ray.util.list_named_actors``)."""

from __future__ import annotations

from typing import List


def list_named_actors(all_namespaces: bool = False) -> List:
    """Names of the named actors of the current namespace, or, with ``all_namespaces``,
    ``{"name": ..., "namespace": ...}`` for every named actor."""
    from rayreact import _api

    return _api._runtime().list_named_actors(all_namespaces)
