"""Application metrics (``ray.util.metrics``): ``Counter``, ``Gauge``, ``Histogram``.

Same constructors, validation and recording calls as Ray. rayreact exports no
Prometheus endpoint, so values are kept in the recording process, per tag set,
where a script or test can read them (``metric.values``).
"""

from __future__ import annotations

import bisect
import re
import threading
import warnings
from typing import Any, Dict, List, Optional, Tuple, Union

_VALID_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def _discarded(name: str) -> bool:
    """Ray refuses empty names and ignores (with a warning) names Prometheus would reject."""
    if not name:
        raise ValueError("Empty name is not allowed. Please provide a metric name.")
    if not _VALID_NAME.match(name):
        warnings.warn(f"Invalid metric name: {name}. Metric will be discarded and data will not be collected or "
                      "published. Metric names can only contain letters, numbers, _, and :. Metric names cannot "
                      "start with numbers.", UserWarning)
        return True
    return False


def _check_number(value) -> None:
    if not isinstance(value, (int, float)):
        raise TypeError(f"value must be int or float, got {type(value)}.")


class Metric:
    """What every metric shares: a name, a description, required tag keys and default tags."""

    def __init__(self, name: str, description: str = "", tag_keys: Optional[Tuple[str, ...]] = None):
        self._discard_metric = _discarded(name)
        self._name = name
        self._description = description
        self._default_tags: Dict[str, str] = {}
        self._tag_keys = tag_keys or tuple()
        if not isinstance(self._tag_keys, tuple):
            raise TypeError(f"tag_keys should be a tuple type, got: {type(self._tag_keys)}")
        for key in self._tag_keys:
            if not isinstance(key, str):
                raise TypeError(f"Tag keys must be str, got {type(key)}.")
        if ":" in name:
            warnings.warn(f"Metric name {name} contains a : character, which is no longer allowed. Please migrate "
                          "to the new metric name format. This will be an error in the future.", FutureWarning)
        self._lock = threading.Lock()
        self.values: Dict[Tuple[Tuple[str, str], ...], Any] = {}

    def set_default_tags(self, default_tags: Dict[str, str]) -> "Metric":
        """Tags used by every recording unless it overrides them; returns the metric."""
        for key, value in default_tags.items():
            if key not in self._tag_keys:
                raise ValueError(f"Unrecognized tag key {key}.")
            if not isinstance(value, str):
                raise TypeError(f"Tag values must be str, got {type(value)}.")
        self._default_tags = default_tags
        return self

    def _tags_key(self, tags: Optional[Dict[str, str]]) -> Tuple[Tuple[str, str], ...]:
        for value in (tags or {}).values():
            if not isinstance(value, str):
                raise TypeError(f"Tag values must be str, got {type(value)}.")
        final = {**self._default_tags, **(tags or {})}
        missing = [key for key in self._tag_keys if key not in final]
        if missing:
            raise ValueError(f"Missing value for tag key(s): {','.join(missing)}.")
        return tuple(sorted(final.items()))

    def _record(self, value, tags, update) -> None:
        if self._discard_metric:
            return
        key = self._tags_key(tags)
        with self._lock:
            self.values[key] = update(self.values.get(key), value)

    @property
    def info(self) -> Dict[str, Any]:
        return {"name": self._name, "description": self._description, "tag_keys": self._tag_keys,
                "default_tags": self._default_tags}

    def __reduce__(self):
        # A metric sent to another process starts empty there, as in Ray.
        return type(self), (self._name, self._description, self._tag_keys)


class Counter(Metric):
    """A total that only goes up."""

    def inc(self, value: Union[int, float] = 1.0, tags: Dict[str, str] = None) -> None:
        _check_number(value)
        if value <= 0:
            raise ValueError(f"value must be >0, got {value}")
        self._record(value, tags, lambda old, v: (old or 0) + v)


class Gauge(Metric):
    """The last value set."""

    def set(self, value: Optional[Union[int, float]], tags: Dict[str, str] = None) -> None:
        if value is None:
            return
        _check_number(value)
        self._record(value, tags, lambda old, v: v)


class Histogram(Metric):
    """Counts of observed values per bucket (``boundaries`` are the buckets' upper bounds)."""

    def __init__(self, name: str, description: str = "", boundaries: List[float] = None,
                 tag_keys: Optional[Tuple[str, ...]] = None):
        super().__init__(name, description, tag_keys)
        if not boundaries:
            raise ValueError('boundaries argument should be provided when using the Histogram class. e.g., '
                             'Histogram("name", boundaries=[1.0, 2.0])')
        for i, boundary in enumerate(boundaries):
            if boundary <= 0:
                raise ValueError(f"Invalid `boundaries` argument at index {i}, {boundaries}. Use positive values "
                                 "for the arguments.")
        self.boundaries = boundaries

    def observe(self, value: Union[int, float], tags: Dict[str, str] = None) -> None:
        _check_number(value)
        bucket = bisect.bisect_left(sorted(self.boundaries), value)

        def add(old, v):
            counts = list(old) if old else [0] * (len(self.boundaries) + 1)
            counts[bucket] += 1
            return counts

        self._record(value, tags, add)

    @property
    def info(self) -> Dict[str, Any]:
        return {**super().info, "boundaries": self.boundaries}

    def __reduce__(self):
        return Histogram, (self._name, self._description, self.boundaries, self._tag_keys)
