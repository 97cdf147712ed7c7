"""``ray.cloudpickle``: the pickler Ray's API exposes for functions, classes and closures.

Ray vendors its own copy under ``ray.cloudpickle``; rayreact serves the installed
``cloudpickle`` under its own name, so that every module reachable from the
top-level package is rayreact's (as every one reachable from ``ray`` is Ray's).
"""

from pickle import PicklingError  # noqa: F401

from cloudpickle import (DEFAULT_PROTOCOL, CloudPickler, Pickler, __version__, dump, dumps,  # noqa: F401
                         load, loads, register_pickle_by_value, unregister_pickle_by_value)


def dumps_debug(obj, *args, **kwargs):
    """``dumps``, naming the object that failed to pickle (as Ray's debug variant does)."""
    try:
        return dumps(obj, *args, **kwargs)
    except (TypeError, PicklingError) as exc:
        raise type(exc)(f"Could not serialize the object {obj!r} with ray.cloudpickle.dumps: {exc}") from exc


def dump_debug(obj, file, *args, **kwargs):
    """``dump``, naming the object that failed to pickle."""
    try:
        return dump(obj, file, *args, **kwargs)
    except (TypeError, PicklingError) as exc:
        raise type(exc)(f"Could not serialize the object {obj!r} with ray.cloudpickle.dump: {exc}") from exc
