"""``ray.job_config``: ``JobConfig``, the per-job settings ``init(job_config=...)`` takes.

On one node what a job config carries that matters is its namespace, its runtime_env and its
metadata (kept, and shown by ``get_runtime_context``'s job); the JVM options and code search
path serve Ray's cross-language workers and are kept without effect.
"""

from __future__ import annotations

import copy

_LIFETIMES = ("detached", "non_detached")


class JobConfig:
    """A job's settings: as Ray's, built with keywords or from ``from_json``."""

    def __init__(self, jvm_options=None, code_search_path=None, runtime_env=None, _client_job=False,
                 metadata=None, ray_namespace=None, default_actor_lifetime="non_detached",
                 _disable_job_level_lineage_reconstruction=False, _py_driver_sys_path=None):
        self.jvm_options = list(jvm_options or [])
        self.code_search_path = list(code_search_path or [])
        if not isinstance(self.code_search_path, list):
            raise TypeError("The type of code search path is incorrect: expected a list")
        self._client_job = _client_job
        self.metadata = dict(metadata or {})
        self.ray_namespace = ray_namespace
        self.runtime_env = {}
        self.set_runtime_env(runtime_env)
        self.default_actor_lifetime = None
        self.set_default_actor_lifetime(default_actor_lifetime)
        self._disable_job_level_lineage_reconstruction = _disable_job_level_lineage_reconstruction
        self._py_driver_sys_path = list(_py_driver_sys_path or [])
        self.py_logging_config = None

    def set_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def set_runtime_env(self, runtime_env, validate: bool = False) -> None:
        if runtime_env is not None and not isinstance(runtime_env, dict):
            runtime_env = dict(runtime_env)
        self.runtime_env = copy.deepcopy(runtime_env) if runtime_env else {}

    def set_ray_namespace(self, ray_namespace: str) -> None:
        self.ray_namespace = ray_namespace

    def set_default_actor_lifetime(self, default_actor_lifetime: str) -> None:
        if default_actor_lifetime not in _LIFETIMES:
            raise ValueError(f"Default actor lifetime must be one of {list(_LIFETIMES)}, "
                             f"but got {default_actor_lifetime!r}")
        self.default_actor_lifetime = default_actor_lifetime

    def set_py_logging_config(self, logging_config=None) -> None:
        self.py_logging_config = logging_config

    @classmethod
    def from_json(cls, job_config_json: dict) -> "JobConfig":
        """A JobConfig from the dict Ray's job submission passes (``runtime_env``, ``metadata``, ...)."""
        return cls(jvm_options=job_config_json.get("jvm_options"),
                   code_search_path=job_config_json.get("code_search_path"),
                   runtime_env=job_config_json.get("runtime_env"),
                   metadata=job_config_json.get("metadata"),
                   ray_namespace=job_config_json.get("ray_namespace"),
                   default_actor_lifetime=job_config_json.get("default_actor_lifetime", "non_detached"))

    def __repr__(self):
        return (f"JobConfig(ray_namespace={self.ray_namespace!r}, runtime_env={self.runtime_env!r}, "
                f"metadata={self.metadata!r})")
