"""The public surface: top-level names and ``exceptions`` match Ray 2.60's.

The expected sets are written out (not read from ``ray``) so the ``ray`` run
checks the lists themselves; the ``rayreact`` run checks the drop-in.  Import
only: these tests start nothing.
"""

import importlib
import inspect

import pytest

from conftest import BACKENDS

# Ray 2.60's top-level functions (callables that are not classes or modules).
TOP_LEVEL_FUNCTIONS = {
    "available_resources", "cancel", "client", "cluster_resources", "get", "get_actor",
    "get_gpu_ids", "get_runtime_context", "init", "is_initialized", "java_actor_class", "java_function", "kill",
    "method", "nodes", "put", "remote", "shutdown", "timeline", "wait",
}

# Top-level classes user code names directly.
TOP_LEVEL_CLASSES = {"ObjectRef", "ObjectRefGenerator", "DynamicObjectRefGenerator", "LoggingConfig"}

# Exception -> the names among its bases that user ``except`` clauses rely on.
EXCEPTION_BASES = {
    "RayError": {"Exception"},
    "RayTaskError": {"RayError"},
    "RayActorError": {"RayError"},
    "ActorDiedError": {"RayActorError"},
    "ActorUnavailableError": {"RayActorError"},
    "ActorAlreadyExistsError": {"ValueError", "RayError"},
    "WorkerCrashedError": {"RayError"},
    "GetTimeoutError": {"RayError", "TimeoutError"},
    "TaskCancelledError": {"RayError"},
    "ObjectLostError": {"RayError"},
    "OwnerDiedError": {"ObjectLostError"},
    "ObjectFreedError": {"ObjectLostError"},
    "ObjectStoreFullError": {"RayError"},
    "OutOfMemoryError": {"RayError"},
    "RaySystemError": {"RayError"},
    "TaskUnschedulableError": {"RayError"},
    "ActorUnschedulableError": {"RayError"},
    "RuntimeEnvSetupError": {"RayError"},
    "NodeDiedError": {"RayError"},
    "LocalRayletDiedError": {"RayError"},
    "CrossLanguageError": {"RayError"},
    "PendingCallsLimitExceeded": {"RayError"},
}


@pytest.fixture(params=BACKENDS)
def backend(request):
    return importlib.import_module(request.param)


def _public_functions(module):
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and callable(value)
            and not inspect.isclass(value) and not inspect.ismodule(value)}


def _all_ancestor_names(cls):
    return {c.__name__ for c in cls.__mro__}


def test_top_level_functions_equal_ray_2_60(backend):
    # rayreact's own additions are declared, not hidden: today only explain() (the reactor's report).
    extensions = set(getattr(backend, "RAYREACT_EXTENSIONS", ()))
    assert extensions <= {"explain"}
    assert _public_functions(backend) - extensions == TOP_LEVEL_FUNCTIONS


def test_top_level_classes_exist(backend):
    for name in TOP_LEVEL_CLASSES:
        assert inspect.isclass(getattr(backend, name)), name


def test_exceptions_module_is_reachable_both_ways(backend):
    assert importlib.import_module(f"{backend.__name__}.exceptions") is backend.exceptions


def test_exception_classes_and_bases(backend):
    wrong = {}
    for name, bases in EXCEPTION_BASES.items():
        cls = getattr(backend.exceptions, name, None)
        if not (inspect.isclass(cls) and issubclass(cls, BaseException) and bases <= _all_ancestor_names(cls)):
            wrong[name] = cls and sorted(_all_ancestor_names(cls))
    assert wrong == {}


def test_every_ray_exception_name_exists(backend):
    import ray.exceptions
    ray_names = {name for name, value in vars(ray.exceptions).items()
                 if inspect.isclass(value) and issubclass(value, BaseException)
                 and value.__module__ == "ray.exceptions"}
    missing = {name for name in ray_names if not hasattr(backend.exceptions, name)}
    assert missing == set()


def test_modules_reachable_from_the_top_level_are_the_backends_own(backend):
    # Ray's top level exposes only its own modules (its cloudpickle is ray.cloudpickle, a vendored copy).
    foreign = {name: value.__name__ for name, value in vars(backend).items()
               if inspect.ismodule(value) and value is not backend
               and not value.__name__.startswith(backend.__name__ + ".")}
    assert foreign == {}


def test_cloudpickle_pickles_closures(backend):
    base = 40
    restored = backend.cloudpickle.loads(backend.cloudpickle.dumps(lambda x: x + base))
    assert restored(2) == 42


def test_top_level_strings_are_dunder_names(backend):
    # Ray's top level has no public string constants (only __version__, __commit__, ...).
    public = {name for name, value in vars(backend).items() if isinstance(value, str) and not name.startswith("__")}
    assert public == set()


# Values a script reads from ``ray.ray_constants`` (Ray 2.60's).
RAY_CONSTANTS = {
    "ID_SIZE": 28, "DEFAULT_PORT": 6379, "DEFAULT_DASHBOARD_PORT": 8265,
    "DEFAULT_OBJECT_STORE_MEMORY_PROPORTION": 0.3, "DEFAULT_ACTOR_METHOD_NUM_RETURN_VALS": 1,
    "DEFAULT_MAX_CONCURRENCY_THREADED": 1, "DEFAULT_TASK_MAX_RETRIES": 3, "KV_NAMESPACE_FUNCTION_TABLE": b"fun",
    "RAY_ADDRESS_ENVIRONMENT_VARIABLE": "RAY_ADDRESS", "RAY_RUNTIME_ENV_ENVIRONMENT_VARIABLE": "RAY_RUNTIME_ENV",
    "OBJECT_STORE_MINIMUM_MEMORY_BYTES": 75 * 1024 * 1024, "CALL_STACK_LINE_DELIMITER": " | ",
}


def test_ray_constants_values(backend):
    constants = importlib.import_module(backend.__name__).ray_constants     # as `from ray import ray_constants`
    assert {name: getattr(constants, name) for name in RAY_CONSTANTS} == RAY_CONSTANTS
    assert constants.env_integer("RAYREACT_TEST_UNSET_VARIABLE", 7) == 7
    assert constants.env_bool("RAYREACT_TEST_UNSET_VARIABLE", True) is True


def test_job_config_and_autoscaler_sdk_import(backend):
    job_config = importlib.import_module(f"{backend.__name__}.job_config")
    config = job_config.JobConfig.from_json({"ray_namespace": "ns", "metadata": {"k": "v"}})
    assert config.ray_namespace == "ns" and config.metadata == {"k": "v"}
    sdk = importlib.import_module(f"{backend.__name__}.autoscaler.sdk")
    assert list(inspect.signature(sdk.request_resources).parameters) == [
        "num_cpus", "bundles", "bundle_label_selectors"]
