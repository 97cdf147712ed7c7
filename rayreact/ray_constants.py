"""``ray.ray_constants``: the constants Ray scripts and test files read, with Ray 2.60's values.

Ray keeps hundreds of internal constants here; the ones below are those a script on one node
can use (sizes, defaults, environment variable names), plus the ``env_*`` readers.
"""

import os

ID_SIZE = 28
DEFAULT_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_OBJECT_STORE_MEMORY_PROPORTION = 0.3
DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES = 200 * 10**9
OBJECT_STORE_MINIMUM_MEMORY_BYTES = 75 * 1024 * 1024
DEFAULT_ACTOR_METHOD_NUM_RETURN_VALS = 1
DEFAULT_MAX_CONCURRENCY_THREADED = 1
DEFAULT_MAX_CONCURRENCY_ASYNC = 1000
DEFAULT_TASK_MAX_RETRIES = 3
KV_NAMESPACE_FUNCTION_TABLE = b"fun"
RAY_ADDRESS_ENVIRONMENT_VARIABLE = "RAY_ADDRESS"
RAY_NAMESPACE_ENVIRONMENT_VARIABLE = "RAY_NAMESPACE"
RAY_RUNTIME_ENV_ENVIRONMENT_VARIABLE = "RAY_RUNTIME_ENV"
RAY_ENABLE_AUTO_CONNECT_ENV_VAR = "RAY_ENABLE_AUTO_CONNECT"
RAY_JOB_SUBMIT_HOOK = "RAY_JOB_SUBMIT_HOOK"
PROCESS_TYPE_WORKER = "worker"
LOGGER_FORMAT = "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"
LOGGER_LEVEL = "info"
CALL_STACK_LINE_DELIMITER = " | "


def env_integer(key, default):
    """The integer in environment variable ``key``, else ``default``."""
    value = os.environ.get(key)
    return default if value is None else int(value)


def env_float(key, default):
    value = os.environ.get(key)
    return default if value is None else float(value)


def env_bool(key, default):
    """``key`` as Ray reads flags: "true" or "1" (any case) is True, anything else set is False."""
    value = os.environ.get(key)
    return default if value is None else value.lower() in ("true", "1")


def env_set_by_user(key):
    return key in os.environ


RAY_DEDUP_LOGS = env_bool("RAY_DEDUP_LOGS", True)
