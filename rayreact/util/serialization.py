"""Custom serializers for a type (``ray.util.register_serializer``).

Registered in this process's ``copyreg`` table, which every pickler consults,
so values of the type sent from this process are serialized with it. As in
Ray, the registration is per process: a worker that sends such values back
must register too (for example in its actor's constructor).
"""

from __future__ import annotations

import copyreg

_registered = {}  # cls -> the reducer we installed, so deregistering leaves others' entries alone


def register_serializer(cls: type, *, serializer: callable, deserializer: callable) -> None:
    """Serialize instances of ``cls`` as ``serializer(obj)``, rebuilt by ``deserializer(...)``."""

    def reduce(obj):
        return deserializer, (serializer(obj),)

    _registered[cls] = reduce
    copyreg.dispatch_table[cls] = reduce


def deregister_serializer(cls: type) -> None:
    """Forget the serializer of ``cls``; nothing happens if none is registered."""
    reduce = _registered.pop(cls, None)
    if reduce is not None and copyreg.dispatch_table.get(cls) is reduce:
        del copyreg.dispatch_table[cls]
