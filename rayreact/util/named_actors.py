"""``list_named_actors``: the names of live named actors (``ray.util.list_named_actors``)."""

from __future__ import annotations

import importlib
from typing import List


def list_named_actors(all_namespaces: bool = False) -> List:
    """Names of the named actors of the current namespace, or, with ``all_namespaces``,
    ``{"name": ..., "namespace": ...}`` for every named actor."""
    import rayreact as ray

    if not ray.is_initialized():
        ray.init()
    hook = getattr(importlib.import_module("rayreact._api"), "list_named_actors", None)
    if hook is None:
        raise NotImplementedError("list_named_actors needs rayreact._api.list_named_actors(all_namespaces), "
                                  "which this core does not provide yet")
    return hook(all_namespaces)
