"""``init`` / ``shutdown`` / ``is_initialized``: each test owns its session.

Kept small on purpose: every test here starts its own session, which costs
seconds on real Ray.
"""

import collections.abc
import importlib
import os
import subprocess
import sys
import re
import time

import pytest

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Probe:
    def pid(self):
        return os.getpid()

    def env(self, name):
        return os.environ.get(name)

    def namespace(self, backend_name):
        import importlib
        return importlib.import_module(backend_name).get_runtime_context().namespace

    def shout(self, token):
        print(token, flush=True)
        return os.getpid()


def shout(token):
    print(token, flush=True)
    return os.getpid()


def process_is_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone for our purposes: it runs no code and holds no memory.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_init_shutdown_and_is_initialized(backend_module):
    ray = backend_module
    assert not ray.is_initialized()
    ray.init(num_cpus=2, include_dashboard=False)
    assert ray.is_initialized()
    assert ray.get(ray.put("up")) == "up"
    ray.shutdown()
    assert not ray.is_initialized()
    ray.shutdown()  # a second shutdown is harmless
    assert not ray.is_initialized()


def test_second_init_raises_unless_ignore_reinit_error(backend_module):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False)
    with pytest.raises(RuntimeError, match="ignore_reinit_error"):
        ray.init(num_cpus=2, include_dashboard=False)
    context = ray.init(num_cpus=1, include_dashboard=False, ignore_reinit_error=True)
    assert context is not None
    assert ray.is_initialized()
    # The first session is still the one in use.
    assert ray.cluster_resources()["CPU"] == 2.0
    ray.shutdown()


def test_init_context_address_info_and_context_manager(backend_module):
    ray = backend_module
    with ray.init(num_cpus=2, include_dashboard=False) as context:
        assert ray.is_initialized()
        info = context.address_info
        assert isinstance(info, collections.abc.Mapping)
        assert isinstance(info["node_ip_address"], str)
        assert info["node_id"] == ray.get_runtime_context().get_node_id()
        assert ray.get(ray.remote(lambda: "inside").remote()) == "inside"
    assert not ray.is_initialized()


def test_init_accepts_ray_keywords(backend_module):
    ray = backend_module
    ray.init(num_cpus=1, num_gpus=0, resources={"slot": 2}, object_store_memory=200 * 1024 * 1024,
             include_dashboard=False, log_to_driver=False, configure_logging=False, logging_level="warning",
             namespace="keywords", _system_config={}, runtime_env={})
    total = ray.cluster_resources()
    assert total["CPU"] == 1.0 and total["slot"] == 2.0 and total.get("GPU", 0.0) == 0.0
    assert ray.get(ray.remote(lambda: 3).remote()) == 3
    ray.shutdown()


def test_auto_init_on_first_use(backend_module):
    ray = backend_module
    assert not ray.is_initialized()
    ref = ray.put([1, 2])  # no init(): the first call starts a session with defaults
    assert ray.is_initialized()
    assert ray.get(ref) == [1, 2]
    assert ray.get(ray.remote(lambda x: x + 1).remote(1)) == 2
    ray.shutdown()
    assert not ray.is_initialized()


def test_runtime_env_env_vars_reach_tasks_and_actors(backend_module):
    ray = backend_module
    name = "RAYREACT_TEST_INIT_VAR"
    assert name not in os.environ
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {name: "from-runtime-env"}})
    assert ray.get(ray.remote(lambda: os.environ.get(name)).remote()) == "from-runtime-env"
    probe = ray.remote(Probe).remote()
    assert ray.get(probe.env.remote(name)) == "from-runtime-env"
    assert name not in os.environ  # the driver's environment is untouched
    ray.shutdown()


def test_namespace(backend_module):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False, namespace="team-a")
    assert ray.get_runtime_context().namespace == "team-a"
    probe = ray.remote(Probe).options(name="probe").remote()
    assert ray.get(probe.namespace.remote(ray.__name__)) == "team-a"
    assert ray.get(ray.get_actor("probe").pid.remote()) == ray.get(probe.pid.remote())
    assert ray.get(ray.get_actor("probe", namespace="team-a").pid.remote()) == ray.get(probe.pid.remote())
    with pytest.raises(ValueError):
        ray.get_actor("probe", namespace="team-b")

    def lookup():
        return ray.get(ray.get_actor("probe").namespace.remote(ray.__name__))

    assert ray.get(ray.remote(lookup).remote()) == "team-a"
    ray.shutdown()


def test_job_config_sets_namespace_and_runtime_env(backend_module):
    ray = backend_module
    job_config = importlib.import_module(f"{ray.__name__}.job_config")
    name = "RAYREACT_TEST_JOB_CONFIG_VAR"
    config = job_config.JobConfig(ray_namespace="from-job-config", runtime_env={"env_vars": {name: "job"}})
    config.set_metadata("owner", "tests")
    ray.init(num_cpus=2, include_dashboard=False, job_config=config)
    assert ray.get_runtime_context().namespace == "from-job-config"
    assert ray.get(ray.remote(lambda: os.environ.get(name)).remote()) == "job"
    ray.shutdown()
    # init's own namespace= wins over the job config's
    ray.init(num_cpus=2, include_dashboard=False, namespace="explicit", job_config=config)
    assert ray.get_runtime_context().namespace == "explicit"
    ray.shutdown()
    with pytest.raises(ValueError):
        job_config.JobConfig(default_actor_lifetime="forever")


def test_request_resources_checks_its_arguments(backend_module):
    ray = backend_module
    sdk = importlib.import_module(f"{ray.__name__}.autoscaler.sdk")
    with pytest.raises(RuntimeError, match="not initialized"):
        sdk.request_resources(num_cpus=2)
    ray.init(num_cpus=2, include_dashboard=False)
    assert sdk.request_resources(num_cpus=2) is None
    assert sdk.request_resources(bundles=[{"CPU": 1}, {"CPU": 1}]) is None
    with pytest.raises(TypeError, match="num_cpus should be of type int"):
        sdk.request_resources(num_cpus=2.5)
    ray.shutdown()


AUTO_CONNECT_OFF = """
import {backend} as ray
for call in (lambda: ray.put(1), lambda: ray.remote(lambda: 1).remote()):
    try:
        call()
        print("no error")
    except ray.exceptions.RaySystemError as exc:
        print("refused:", exc)
print("initialized", ray.is_initialized())
ray.init(num_cpus=1, include_dashboard=False)
print("after init", ray.get(ray.put(5)))
ray.shutdown()
"""


def test_auto_connect_off_refuses_calls_before_init(backend_module):
    # Ray reads the variable when it is imported: set it in a fresh interpreter's environment.
    env = dict(os.environ, RAY_ENABLE_AUTO_CONNECT="0")
    done = subprocess.run([sys.executable, "-c", AUTO_CONNECT_OFF.format(backend=backend_module.__name__)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["refused: System error: Ray has not been started yet. You can start Ray with "
                         "'ray.init()'."] * 2
    assert lines[2:] == ["initialized False", "after init 5"]


def test_default_namespace_is_anonymous(backend_module):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False)
    namespace = ray.get_runtime_context().namespace
    assert isinstance(namespace, str) and namespace
    probe = ray.remote(Probe).remote()
    assert ray.get(probe.namespace.remote(ray.__name__)) == namespace
    ray.shutdown()


def test_shutdown_ends_worker_and_actor_processes(backend_module):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False)
    actor_pid = ray.get(ray.remote(Probe).remote().pid.remote())
    task_pid = ray.get(ray.remote(lambda: os.getpid()).remote())
    ray.shutdown()
    deadline = time.time() + 30
    while not (process_is_gone(actor_pid) and process_is_gone(task_pid)):
        assert time.time() < deadline, "worker processes outlived shutdown"
        time.sleep(0.05)


def test_remote_functions_survive_reinit(backend_module):
    ray = backend_module
    double = ray.remote(lambda x: 2 * x)
    holder = ray.remote(Probe)
    for _ in range(2):
        ray.init(num_cpus=2, include_dashboard=False)
        assert ray.get(double.remote(4)) == 8
        assert isinstance(ray.get(holder.remote().pid.remote()), int)
        ray.shutdown()


def test_ref_from_a_previous_session_is_rejected(backend_module):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False)
    stale = ray.put("old")
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False)
    with pytest.raises(ValueError):
        ray.get(stale, timeout=30)
    ray.shutdown()


def test_worker_output_is_forwarded_with_a_prefix(backend_module, capfd):
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True)
    task_pid = ray.get(ray.remote(shout).remote("token-from-task"))
    actor_pid = ray.get(ray.remote(Probe).remote().shout.remote("token-from-actor"))
    seen = ""
    deadline = time.time() + 30
    while not ("token-from-task" in seen and "token-from-actor" in seen):
        assert time.time() < deadline, f"worker output never reached the driver: {seen!r}"
        time.sleep(0.1)
        out, err = capfd.readouterr()
        seen += ANSI.sub("", out + err)
    assert f"(shout pid={task_pid}) token-from-task" in seen
    assert f"(Probe pid={actor_pid}) token-from-actor" in seen
    ray.shutdown()


def test_local_mode_flag(backend_module):
    # Ray 2.60 removed local mode and says so; rayreact brings it back (test_local_mode.py
    # checks its semantics against Ray's normal mode).
    ray = backend_module
    if ray.__name__ == "ray":
        with pytest.raises(RuntimeError, match="local_mode"):
            ray.init(local_mode=True)
        assert not ray.is_initialized()
    else:
        ray.init(local_mode=True)
        assert ray.get(ray.remote(lambda: os.getpid()).remote()) == os.getpid()
        ray.shutdown()


def test_actor_handle_from_a_previous_session_fails(backend_module):
    # Ray raises at submission, rayreact at get (RayActorError); either way a clear
    # error naming the actor, never a hang or a result from a dead session.
    ray = backend_module
    ray.init(num_cpus=2, include_dashboard=False)
    old = ray.remote(Probe).remote()
    ray.get(old.pid.remote())
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False)
    with pytest.raises(Exception, match="(?i)actor"):
        ray.get(old.pid.remote(), timeout=30)
    ray.shutdown()
