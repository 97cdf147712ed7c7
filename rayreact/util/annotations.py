"""API stability decorators (``ray.util.annotations``): they mark objects and leave them working."""

from __future__ import annotations

import functools
import inspect
import warnings
from enum import Enum


class AnnotationType(Enum):
    PUBLIC_API = "PublicAPI"
    DEVELOPER_API = "DeveloperAPI"
    DEPRECATED = "Deprecated"
    UNKNOWN = "Unknown"


class RayDeprecationWarning(DeprecationWarning):
    """A deprecated API was used."""


def _mark(obj, kind: AnnotationType):
    try:
        setattr(obj, f"_annotated_{kind.value}", True)
        obj._annotated_type = kind
    except (AttributeError, TypeError):
        pass  # builtins and slotted objects cannot be marked; they still work
    return obj


def _decorator(kind: AnnotationType, args, kwargs):
    """Support both ``@Deco`` and ``@Deco(...)``."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return _mark(args[0], kind)
    return lambda obj: _mark(obj, kind)


def PublicAPI(*args, **kwargs):
    """Marks a stable public API. ``@PublicAPI`` or ``@PublicAPI(stability="beta"|"alpha"|"stable")``."""
    stability = kwargs.get("stability", "stable")
    if stability not in ("stable", "beta", "alpha"):
        raise ValueError(f"stability must be one of 'stable', 'beta', 'alpha', got {stability!r}")
    return _decorator(AnnotationType.PUBLIC_API, args, kwargs)


def DeveloperAPI(*args, **kwargs):
    """Marks an API for advanced users."""
    return _decorator(AnnotationType.DEVELOPER_API, args, kwargs)


def Deprecated(*args, **kwargs):
    """Marks a deprecated API; with ``warning=True`` each use warns ``RayDeprecationWarning``."""
    message = kwargs.get("message", "")
    warn = kwargs.get("warning", False)

    def wrap(obj):
        if not warn:
            return _mark(obj, AnnotationType.DEPRECATED)
        text = f"{getattr(obj, '__qualname__', obj)} is deprecated. {message}".strip()
        if inspect.isclass(obj):
            original_init = obj.__init__

            @functools.wraps(original_init)
            def init(*a, **kw):
                warnings.warn(text, RayDeprecationWarning, stacklevel=2)
                return original_init(*a, **kw)

            obj.__init__ = init
            return _mark(obj, AnnotationType.DEPRECATED)

        @functools.wraps(obj)
        def wrapper(*a, **kw):
            warnings.warn(text, RayDeprecationWarning, stacklevel=2)
            return obj(*a, **kw)

        return _mark(wrapper, AnnotationType.DEPRECATED)

    if len(args) == 1 and not kwargs and callable(args[0]):
        return wrap(args[0])
    return wrap
