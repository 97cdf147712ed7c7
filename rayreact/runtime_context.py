"""``get_runtime_context()`` and the id classes of Ray's top level."""

from __future__ import annotations

import os


class BaseID:
    size = 28

    def __init__(self, binary: bytes):
        self._binary = binary

    def binary(self):
        return self._binary

    def hex(self):
        return self._binary.hex()

    def is_nil(self):
        return not any(self._binary)

    @classmethod
    def nil(cls):
        return cls(b"\0" * cls.size)

    @classmethod
    def from_random(cls):
        return cls(os.urandom(cls.size))

    @classmethod
    def from_binary(cls, b):
        return cls(b)

    @classmethod
    def from_hex(cls, h):
        return cls(bytes.fromhex(h))

    def __eq__(self, other):
        return type(other) is type(self) and other._binary == self._binary

    def __hash__(self):
        return hash(self._binary)

    def __repr__(self):
        return f"{type(self).__name__}({self.hex()})"


class UniqueID(BaseID):
    pass


class JobID(BaseID):
    size = 4


class ActorID(BaseID):
    size = 16


class ActorClassID(BaseID):
    pass


class TaskID(BaseID):
    size = 24


class NodeID(BaseID):
    pass


class WorkerID(BaseID):
    pass


class FunctionID(BaseID):
    pass


class ObjectID(BaseID):
    pass


class PlacementGroupID(BaseID):
    size = 18


class ClusterID(BaseID):
    pass


class Language:
    PYTHON = 0
    JAVA = 1
    CPP = 2


from .object_ref import DynamicObjectRefGenerator, ObjectRefGenerator  # noqa: E402,F401


class LoggingConfig:
    def __init__(self, encoding="TEXT", log_level="INFO", additional_log_standard_attrs=None):
        self.encoding = encoding
        self.log_level = log_level
        self.additional_log_standard_attrs = additional_log_standard_attrs or []


class RuntimeContext:
    """Facts about the current driver or worker, read from the runtime when asked (``runtime_info``)."""

    def __init__(self, rt):
        self._rt = rt

    def _info(self):
        return self._rt.runtime_info()

    def get_job_id(self):
        return self._info().job_id.hex()

    @property
    def job_id(self):
        return JobID(self._info().job_id)

    def get_node_id(self):
        return self._info().node_id.hex()

    @property
    def node_id(self):
        return NodeID(self._info().node_id)

    def get_worker_id(self):
        return f"{os.getpid():056x}"

    def get_task_id(self):
        tid = self._info().task_id
        return tid.hex() if tid else None

    @property
    def task_id(self):
        tid = self._info().task_id
        return TaskID(tid) if tid else None

    def get_actor_id(self):
        aid = self._info().actor_id
        return aid.hex() if aid else None

    @property
    def actor_id(self):
        aid = self._info().actor_id
        return ActorID(aid) if aid else None

    def get_actor_name(self):
        return self._info().actor_name

    @property
    def namespace(self):
        return self._info().namespace

    def get_namespace(self):
        return self._info().namespace

    @property
    def was_current_actor_reconstructed(self):
        return bool(self._info().num_restarts)

    @property
    def current_actor(self):
        if not self._info().is_actor:
            raise RuntimeError("This method is only available in an actor.")
        return self._rt.current_actor_handle()

    def is_canceled(self):
        """Whether ray.cancel was called on the task or actor call running now (for a graceful stop)."""
        return self._rt.current_call_cancelled()     # RuntimeError in a driver

    def get_assigned_resources(self):
        return dict(self._info().assigned_resources)

    def get_accelerator_ids(self):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return {"GPU": [x for x in visible.split(",") if x] if visible else []}

    def get_runtime_env_string(self):
        return "{}"

    @property
    def runtime_env(self):
        return {}

    @property
    def gcs_address(self):
        return "rayreact://local"

    def get(self):
        return {"job_id": self.job_id, "node_id": self.node_id, "namespace": self.namespace,
                "task_id": self.task_id, "actor_id": self.actor_id}

    def get_node_labels(self):
        return {}

    def get_placement_group_id(self):
        pg = self._info().placement_group
        return pg[0] if pg else None

    @property
    def should_capture_child_tasks_in_placement_group(self):
        pg = self._info().placement_group
        return bool(pg and pg[1])


def get_runtime_context() -> RuntimeContext:
    """``ray.runtime_context.get_runtime_context``: the same as the top-level ``get_runtime_context()``."""
    from . import _api
    return _api.get_runtime_context()
