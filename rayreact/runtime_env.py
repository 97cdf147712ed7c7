"""``ray.runtime_env``: ``RuntimeEnv`` and ``RuntimeEnvConfig``, the typed forms of a ``runtime_env`` dict.

Both are dicts, as in Ray, so anything that takes ``runtime_env={...}`` (``init``, ``.options``,
``@remote``, ``JobConfig``) takes them too.  On one node rayreact applies ``env_vars``,
``working_dir``, ``py_modules`` and ``worker_process_setup_hook`` (see README); the packaging fields
(``pip``, ``conda``, ``uv``, ``container``, ``image_uri``) are accepted and checked for their type only:
the workers run in the driver's environment.
"""

from __future__ import annotations

import json

#: The fields Ray 2.60 knows, with the types it accepts for them.
KNOWN_FIELDS = {
    "py_modules": (list,), "py_executable": (str,), "java_jars": (list,), "working_dir": (str,),
    "pip": (list, str, dict), "uv": (list, str, dict), "conda": (dict, str), "container": (dict,),
    "env_vars": (dict,), "worker_process_setup_hook": (str,), "nsight": (str, dict), "config": (dict,),
    "excludes": (list,), "image_uri": (str,), "mpi": (dict,), "rocprof_sys": (dict,),
}


class RuntimeEnvConfig(dict):
    """How a runtime environment is set up: ``setup_timeout_seconds`` (a positive int, or -1 for no
    limit), ``eager_install`` (bool) and ``log_files`` (a list of str)."""

    known_fields = {"setup_timeout_seconds", "eager_install", "log_files"}

    def __init__(self, setup_timeout_seconds: int = 600, eager_install: bool = True, log_files=None):
        super().__init__()
        if not isinstance(setup_timeout_seconds, int) or isinstance(setup_timeout_seconds, bool):
            raise TypeError(f"setup_timeout_seconds must be of type int, got: {type(setup_timeout_seconds)}")
        if setup_timeout_seconds <= 0 and setup_timeout_seconds != -1:
            raise ValueError(f"setup_timeout_seconds must be greater than zero or equals to -1, got: "
                             f"{setup_timeout_seconds}")
        if not isinstance(eager_install, bool):
            raise TypeError(f"eager_install must be a boolean. got {type(eager_install)}")
        if log_files is not None and (not isinstance(log_files, list)
                                      or not all(isinstance(f, str) for f in log_files)):
            raise TypeError(f"log_files must be a list of strings or None, got {log_files!r}")
        self["setup_timeout_seconds"] = setup_timeout_seconds
        self["eager_install"] = eager_install
        self["log_files"] = list(log_files or [])

    @staticmethod
    def parse_and_validate_runtime_env_config(config) -> "RuntimeEnvConfig":
        if isinstance(config, RuntimeEnvConfig):
            return config
        if isinstance(config, dict):
            unknown = set(config) - RuntimeEnvConfig.known_fields
            if unknown:
                raise ValueError(f"The following unknown entries in the runtime_env config dictionary were "
                                 f"specified: {sorted(unknown)}")
            return RuntimeEnvConfig(**config)
        raise TypeError(f"runtime_env['config'] must be of type dict or RuntimeEnvConfig, got: {type(config)}")


class RuntimeEnv(dict):
    """A ``runtime_env`` as a dict of its fields; ``None`` fields are left out.  Fields Ray does not know
    are kept unchecked (Ray's plugins read them); where they reach a runtime, rayreact refuses them."""

    known_fields = set(KNOWN_FIELDS)

    def __init__(self, *, py_modules=None, py_executable=None, working_dir=None, pip=None, conda=None,
                 container=None, env_vars=None, worker_process_setup_hook=None, nsight=None, config=None,
                 _validate: bool = True, mpi=None, image_uri=None, uv=None, **kwargs):
        super().__init__()
        given = dict(py_modules=py_modules, py_executable=py_executable, working_dir=working_dir, pip=pip,
                     conda=conda, container=container, env_vars=env_vars,
                     worker_process_setup_hook=worker_process_setup_hook, nsight=nsight, config=config,
                     mpi=mpi, image_uri=image_uri, uv=uv, **kwargs)
        for key, value in given.items():
            if value is not None:
                self[key] = value
        if _validate:
            self._validate()

    def _validate(self):
        if sum(key in self for key in ("pip", "uv", "conda")) > 1:
            raise ValueError("The 'pip' field, 'uv' field, and 'conda' field of runtime_env cannot be specified "
                             "at the same time. To use pip with conda, set only 'conda' and list the pip "
                             "dependencies in its YAML config.")
        for key, value in self.items():
            types = KNOWN_FIELDS.get(key)
            if types is not None and not isinstance(value, types):
                names = " or ".join(t.__name__ for t in types)
                raise TypeError(f"runtime_env field {key!r} must be of type {names}, got {type(value).__name__}")
        env = self.get("env_vars")
        if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise TypeError("runtime_env['env_vars'] must be of type Dict[str, str]")
        if "config" in self:
            self["config"] = RuntimeEnvConfig.parse_and_validate_runtime_env_config(self["config"])

    # ---------------------------------------------------------------- Ray's accessors
    def to_dict(self) -> dict:
        return {k: (dict(v) if isinstance(v, RuntimeEnvConfig) else v) for k, v in self.items()}

    def serialize(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def deserialize(cls, serialized: str) -> "RuntimeEnv":
        return cls(**json.loads(serialized))

    def env_vars(self) -> dict:
        return dict(self.get("env_vars") or {})

    def working_dir(self) -> str:
        return self.get("working_dir", "")

    def py_modules(self) -> list:
        return list(self.get("py_modules") or [])

    def has_working_dir(self) -> bool:
        return bool(self.get("working_dir"))

    def has_py_modules(self) -> bool:
        return bool(self.get("py_modules"))

    def worker_process_setup_hook(self):
        return self.get("worker_process_setup_hook")

    def get_extension(self, key, default=None):
        return self.get(key, default)

    def set(self, name: str, value) -> None:
        self[name] = value
        self._validate()


__all__ = ["RuntimeEnv", "RuntimeEnvConfig"]
