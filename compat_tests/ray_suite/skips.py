"""The skip list: Ray tests that exercise Ray internals or multiple nodes (the only two reasons).

Keys are ``<file>::<test name>`` (parametrized ids included by prefix); each value says why.
"""

INTERNALS = "tests a Ray internal, not public API"
MULTI_NODE = "needs more than one node (rayreact runs on one machine)"

SKIPS = {
    # test_basic_2.py
    "test_basic_2.py::test_call_chain": MULTI_NODE + ": ray_start_cluster / ray.cluster_utils",
    "test_basic_2.py::test_system_config_when_connecting": MULTI_NODE + ": ray.cluster_utils.Cluster",
    "test_basic_2.py::test_skip_plasma": INTERNALS + ": core_worker.object_exists",
    "test_basic_2.py::test_actor_large_objects": INTERNALS + ": core_worker.object_exists",
    "test_basic_2.py::test_get_correct_node_ip": INTERNALS + ": patches ray._private.worker._global_node",
    "test_basic_2.py::test_use_dynamic_function_and_class": INTERNALS + ": GCS function table keys",
    "test_basic_2.py::test_load_code_from_local": MULTI_NODE + ": a second driver joins the running cluster "
                                                 "by its address",
    # test_actor.py
    "test_actor.py::test_actor_method_metadata_cache": INTERNALS + ": ray.actor.ActorClassMethodMetadata",
    "test_actor.py::test_actor_class_name": INTERNALS + ": GCS internal KV via ray.worker.global_worker",
    # test_wait.py
    "test_wait.py::test_wait_always_fetch_local": MULTI_NODE + ": ray_start_cluster",
    "test_wait.py::test__wait_generators_bulk": INTERNALS + ": ray._private.worker._wait_generators_bulk",
    "test_wait.py::test__consume_next_ref_n": INTERNALS + ": private ObjectRefGenerator methods",
    "test_wait.py::test__get_next_ref_n": INTERNALS + ": private ObjectRefGenerator methods",
    # test_top_level_api.py
    "test_top_level_api.py::test_dynamic_subpackage_fallback_only": INTERNALS + ": ray._raylet",
    "test_top_level_api.py::test_dynamic_subpackage_import": MULTI_NODE + ": ray.autoscaler (cluster "
                                                             "autoscaling package)",
    # test_actor_failures.py
    "test_actor_failures.py::test_decorated_method": INTERNALS + ": __ray_invocation_decorator__, the hook behind "
                                                     "ActorMethod(decorator=...), which user code never builds",
    # test_generators.py
    "test_generators.py::test_generator_oom": INTERNALS + ": the node's memory monitor and object spilling "
                                              "(a task makes 10 GB of return values)",
}


def reason_for(file_name, test_name):
    """The documented reason to skip ``test_name`` of ``file_name``, or None."""
    for key, reason in SKIPS.items():
        f, _, prefix = key.partition("::")
        if f == file_name and test_name.startswith(prefix):
            return reason
    return None
