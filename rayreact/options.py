"""Validation of ``@remote`` / ``.options()`` keywords, with Ray's names and messages."""

_COMMON = ["label_selector", "fallback_strategy", "accelerator_type", "memory", "name", "num_cpus", "num_gpus",
           "object_store_memory", "placement_group", "placement_group_bundle_index",
           "placement_group_capture_child_tasks", "resources", "runtime_env", "scheduling_strategy",
           "enable_task_events", "_labels"]
TASK_OPTIONS = _COMMON + ["max_calls", "max_retries", "num_returns", "retry_exceptions",
                          "_generator_backpressure_num_objects", "_num_objects_per_yield"]
ACTOR_OPTIONS = _COMMON + ["concurrency_groups", "enable_tensor_transport", "lifetime", "max_concurrency",
                           "max_restarts", "max_task_retries", "max_pending_calls", "namespace", "get_if_exists",
                           "allow_out_of_order_execution", "_actor_generator_backpressure_num_objects"]
_RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "object_store_memory")


def validate_task_options(options: dict, in_options: bool = False) -> dict:
    return _validate(options, TASK_OPTIONS, "remote functions")


def validate_actor_options(options: dict, in_options: bool = False) -> dict:
    opts = _validate(options, ACTOR_OPTIONS, "actors")
    if "max_concurrency" in opts and opts["max_concurrency"] is not None and opts["max_concurrency"] < 1:
        raise ValueError("max_concurrency must be >= 1")
    if opts.get("get_if_exists") and not opts.get("name"):
        raise ValueError("The actor name must be specified to use `get_if_exists`.")
    lifetime = opts.get("lifetime")
    if lifetime not in (None, "detached", "non_detached"):
        raise ValueError("actor `lifetime` argument must be one of 'detached', 'non_detached' and 'None'.")
    if "name" in opts and opts["name"] is not None and not isinstance(opts["name"], str):
        raise TypeError(f"name must be None or a string, got: '{type(opts['name'])}'.")
    if opts.get("name") == "":
        raise ValueError("Actor name cannot be an empty string.")
    namespace = opts.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError(f"The type of keyword 'namespace' must be {(str, type(None))}, but received type "
                        f"{type(namespace)}")
    return opts


def _validate(options, valid, what):
    for key in options:
        if key not in valid:
            raise ValueError(f"Invalid option keyword {key} for {what}. Valid ones are {valid}.")
    for key in _RESOURCE_KEYS:
        value = options.get(key)
        if value is not None:
            if not isinstance(value, (int, float)):
                raise TypeError(f"The resource quantity {key} must be a number, got {type(value).__name__}")
            if value < 0:
                raise ValueError(f"The quantity of resource {key} cannot be negative")
    resources = options.get("resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise TypeError("The 'resources' option must be a dict of resource name to quantity.")
        for name, qty in resources.items():
            if name in ("CPU", "GPU"):
                raise ValueError("Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' in "
                                 "'resources' keyword")
            if not isinstance(qty, (int, float)) or qty < 0:
                raise ValueError(f"The quantity of resource {name} must be a non-negative number")
    num_returns = options.get("num_returns")
    if num_returns is not None and num_returns not in ("dynamic", "streaming"):
        if not isinstance(num_returns, int) or num_returns < 0:
            raise ValueError("The keyword 'num_returns' only accepts None, a non-negative integer, "
                             "'streaming' (for generators), or 'dynamic'.")
    max_retries = options.get("max_retries")
    if max_retries is not None and (not isinstance(max_retries, int) or max_retries < -1):
        raise ValueError("The keyword 'max_retries' only accepts 0, -1 or a positive integer")
    max_restarts = options.get("max_restarts")
    if max_restarts is not None and (not isinstance(max_restarts, int) or max_restarts < -1):
        raise ValueError("The keyword 'max_restarts' only accepts -1, 0 or a positive integer")
    return dict(options)


def decorator_misuse_message():
    return ("The @ray.remote decorator must be applied either with no arguments and no parentheses, for example "
            "'@ray.remote', or it must be applied using some of the arguments in the list "
            f"{sorted(set(TASK_OPTIONS) | set(ACTOR_OPTIONS))}, for example "
            "'@ray.remote(num_returns=2, resources={\"CustomResource\": 1})'.")
