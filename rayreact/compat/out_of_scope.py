"""What of Ray 2.60's core API rayreact leaves out on purpose, each with its reason.

``tests/test_surface_parity.py`` walks the public names of Ray's core modules (``ray``, ``ray.actor``,
``ray.remote_function``, ``ray.runtime_context``, ``ray.exceptions``, ``ray.job_config``,
``ray.runtime_env``, ``ray.autoscaler.sdk``, ``ray.cloudpickle``, ``ray.util`` and every submodule of
it): each exists in rayreact under the same path, or stands here.  An entry for a name rayreact has
fails that test too, so the list stays true.  Where a script needs what is listed here, it can run on
real Ray through ``init(address=...)``, which rayreact hands over whole.
"""

#: Whole modules (Ray's path) that rayreact does not provide.
MODULES = {
    "ray.util.actor_group": "deprecated in Ray (ActorGroup); use a list of actors or ActorPool",
    "ray.util.check_open_ports": "a cluster diagnostic about open ports; rayreact opens none",
    "ray.util.client": "Ray Client connects to a remote cluster; rayreact hands remote work to real Ray",
    "ray.util.collective": "NCCL/Gloo collectives between GPU actors across nodes: a library of its own",
    "ray.util.common": "internal helpers of Ray's libraries, no public names",
    "ray.util.dask": "Dask-on-Ray scheduler: a library integration, out of the core API",
    "ray.util.iter": "ParallelIterator, deprecated in Ray; use tasks or ActorPool",
    "ray.util.iter_metrics": "metrics of the deprecated ParallelIterator",
    "ray.util.joblib": "joblib backend: a library integration, out of the core API",
    "ray.util.serialization_addons": "serializers for Starlette/Serve objects (Ray Serve's)",
    "ray.util.spark": "starts Ray clusters on Apache Spark: a cluster launcher",
    "ray.util.state": "the State API queries the dashboard's state server; rayreact runs no dashboard "
                      "(explain() and ray.timeline() report what a single node does)",
    "ray.util.timer": "internal timer of Ray's libraries, no public names",
    "ray.util.tpu": "TPU pod slices: multi-host accelerators, not one node",
    "ray.util.tracing": "OpenTelemetry hooks of Ray's own processes, no public names",
}

#: Single names: (Ray's module, name) -> reason.
NAMES = {
    ("ray", "ClientBuilder"): "Ray Client (ray://) connects to remote clusters; init(address=...) hands those to Ray",
    ("ray", "cpp_function"): "in Ray's __all__, yet Ray 2.60 defines no such name (C++ workers are not Python)",
    ("ray", "data"): "Ray Data is one of Ray's libraries (import it from ray itself)",
    ("ray", "workflow"): "Ray Workflows is one of Ray's libraries, removed from recent Ray",
    ("ray", "widgets"): "Jupyter widgets of Ray's dashboard",
    ("ray", "internal"): "Ray's internal namespace (ray.internal.free and such), not public API",
    ("ray", "_config"): "Ray's internal system config (private, C++ side)",
    ("ray.autoscaler.sdk", "create_or_update_cluster"): "cluster launcher: one node has no cluster to launch",
    ("ray.autoscaler.sdk", "teardown_cluster"): "cluster launcher",
    ("ray.autoscaler.sdk", "run_on_cluster"): "cluster launcher",
    ("ray.autoscaler.sdk", "rsync"): "cluster launcher",
    ("ray.autoscaler.sdk", "get_head_node_ip"): "cluster launcher",
    ("ray.autoscaler.sdk", "get_worker_node_ips"): "cluster launcher",
    ("ray.autoscaler.sdk", "configure_logging"): "cluster launcher's logging",
    ("ray.autoscaler.sdk", "bootstrap_config"): "cluster launcher",
    ("ray.autoscaler.sdk", "fillout_defaults"): "cluster launcher",
    ("ray.autoscaler.sdk", "register_callback_handler"): "cluster launcher's event callbacks",
    ("ray.autoscaler.sdk", "get_docker_host_mount_location"): "cluster launcher (Docker nodes)",
    ("ray.util", "collective"): "see ray.util.collective",
    ("ray.util", "iter"): "see ray.util.iter",
    ("ray.util.accelerators", "tpu"): "see ray.util.tpu",
    ("ray.util.debug", "Suspect"): "a record of Ray's memory-leak detector, which reads Ray's own processes",
    ("ray.util.serialization", "StandaloneSerializationContext"): "Ray's serialization context outside a worker; "
                                                                 "rayreact registers serializers globally",
}
