"""``ray.ObjectRef`` and the generators of refs (``ray.ObjectRefGenerator``): defined in the core."""

from .core.refs import DynamicObjectRefGenerator, ObjectRef, ObjectRefGenerator

__all__ = ["ObjectRef", "ObjectRefGenerator", "DynamicObjectRefGenerator"]
