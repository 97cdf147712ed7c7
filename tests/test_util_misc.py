"""The rest of ``util``: its public names, result iterators, named actors, serialization helpers, logging.

Every expectation holds on real Ray 2.60's ``ray.util``; the same test runs on
``rayreact.util``.
"""

import io
import threading
import uuid

import pytest

from conftest import backend_fixture, submodule

# On rayreact-replay: these are one-call probes of ray.util's surface; 1 to 3 of the 11 repeat a pattern
# long enough to replay within the repetitions (it varies with timing), so none is required to.
ray_backend = backend_fixture(replay=True, must_replay=False)

# ray.util.__all__ also lists "collective" (NCCL/Gloo groups, outside rayreact's scope) and "iter"
# (the deprecated ParallelIterator).
PUBLIC_NAMES = {
    "accelerators", "ActorPool", "as_completed", "disable_log_once_globally", "enable_periodic_logging", "log_once",
    "pdb", "placement_group", "placement_group_table", "get_placement_group", "get_current_placement_group",
    "get_node_instance_id", "get_node_ip_address", "map_unordered", "remove_placement_group", "ray_debugpy",
    "inspect_serializability", "connect", "disconnect", "register_serializer", "deregister_serializer",
    "list_named_actors",
}


def identity(x):
    return x


class Point:
    def __init__(self, x):
        self.x = x


def test_public_names_exist(ray_backend):
    missing = {name for name in PUBLIC_NAMES if not hasattr(ray_backend.util, name)}
    assert missing == set()
    for module in ["util.queue", "util.multiprocessing", "util.placement_group", "util.scheduling_strategies",
                   "util.actor_pool", "util.annotations", "util.debug", "util.helpers", "util.accelerators",
                   "util.metrics"]:
        submodule(ray_backend, module)


def test_as_completed_yields_every_result(ray_backend):
    f = ray_backend.remote(identity)
    refs = [f.remote(i) for i in range(7)]
    assert sorted(ray_backend.util.as_completed(refs, chunk_size=3)) == list(range(7))
    as_refs = list(ray_backend.util.as_completed(refs, chunk_size=2, yield_obj_refs=True))
    assert sorted(ray_backend.get(as_refs)) == list(range(7))
    with pytest.raises(ValueError):
        list(ray_backend.util.as_completed(refs, chunk_size=0))
    with pytest.raises(ValueError):
        list(ray_backend.util.as_completed(refs, num_returns=2))


def test_map_unordered_applies_backpressure_and_yields_everything(ray_backend):
    f = ray_backend.remote(identity)
    out = ray_backend.util.map_unordered(f, range(10), backpressure_size=3, chunk_size=1)
    assert sorted(out) == list(range(10))
    assert sorted(ray_backend.util.map_unordered(f, range(5), backpressure_size=None)) == list(range(5))
    with pytest.raises(ValueError):
        list(ray_backend.util.map_unordered(f, range(3), backpressure_size=0))


def test_list_named_actors(ray_backend):
    @ray_backend.remote
    class Named:
        def ping(self):
            return 1

    handles = [Named.options(name=f"util-named-{i}").remote() for i in range(2)]
    ray_backend.get([h.ping.remote() for h in handles])
    assert {"util-named-0", "util-named-1"} <= set(ray_backend.util.list_named_actors())
    everywhere = ray_backend.util.list_named_actors(all_namespaces=True)
    assert {"name": "util-named-0", "namespace": ray_backend.get_runtime_context().namespace} in everywhere
    for h in handles:
        ray_backend.kill(h)


def test_node_ip_address_and_instance_id(ray_backend):
    import ipaddress

    ipaddress.ip_address(ray_backend.util.get_node_ip_address())
    assert isinstance(ray_backend.util.get_node_instance_id(), str)


def test_inspect_serializability_finds_the_culprit(ray_backend):
    lock = threading.Lock()

    def uses_lock():
        return lock

    out = io.StringIO()
    ok, failures = ray_backend.util.inspect_serializability(uses_lock, name="uses_lock", print_file=out)
    assert not ok
    assert any(f.obj is lock for f in failures)
    assert "lock" in out.getvalue()
    ok, failures = ray_backend.util.inspect_serializability(identity, print_file=io.StringIO())
    assert ok and not failures


def test_registered_serializer_is_used_for_arguments(ray_backend):
    f = ray_backend.remote(lambda p: (type(p).__name__, p))
    ray_backend.util.register_serializer(Point, serializer=lambda p: p.x, deserializer=lambda x: x * 10)
    try:
        assert ray_backend.get(f.remote(Point(4))) == ("int", 40)
    finally:
        ray_backend.util.deregister_serializer(Point)
    name, value = ray_backend.get(f.remote(Point(4)))
    assert name == "Point" and value.x == 4


def test_log_once():
    # Pure process-local state: checked on rayreact only, as Ray's switches are global to the process.
    import rayreact.util.debug as debug

    assert debug.log_once("util-misc-key")
    assert not debug.log_once("util-misc-key")
    debug.reset_log_once("util-misc-key")
    assert debug.log_once("util-misc-key")


def test_log_once_is_exported(ray_backend):
    # log_once's memory is the process's: a key no earlier run (or backend) in this process has used.
    key = f"util-misc-{uuid.uuid4().hex}"
    assert ray_backend.util.log_once(key)
    assert not ray_backend.util.log_once(key)


def test_accelerator_names(ray_backend):
    accelerators = ray_backend.util.accelerators
    assert (accelerators.NVIDIA_TESLA_V100, accelerators.NVIDIA_A100, accelerators.NVIDIA_H100) == (
        "V100", "A100", "H100")


def test_annotations_leave_objects_working(ray_backend):
    annotations = submodule(ray_backend, "util.annotations")

    @annotations.PublicAPI
    def plain():
        return 1

    @annotations.PublicAPI(stability="beta")
    class Beta:
        pass

    @annotations.DeveloperAPI
    def dev():
        return 2

    assert plain() == 1 and isinstance(Beta(), Beta) and dev() == 2


def test_metrics_validate_and_record(ray_backend):
    metrics = submodule(ray_backend, "util.metrics")
    counter = metrics.Counter("util_test_requests", description="requests", tag_keys=("route",))
    with pytest.raises(ValueError):
        counter.inc(1)  # the tag key has no value
    with pytest.raises(ValueError):
        counter.inc(0, tags={"route": "/"})
    with pytest.raises(TypeError):
        counter.inc("1", tags={"route": "/"})
    assert counter.set_default_tags({"route": "/"}) is counter
    counter.inc()
    counter.inc(2.5, tags={"route": "/other"})
    assert counter.info["tag_keys"] == ("route",) and counter.info["default_tags"] == {"route": "/"}
    with pytest.raises(ValueError):
        counter.set_default_tags({"unknown": "x"})
    with pytest.raises(TypeError):
        metrics.Counter("util_test_bad_keys", tag_keys=["route"])
    with pytest.raises(ValueError):
        metrics.Counter("")
    with pytest.raises(ValueError):
        metrics.Histogram("util_test_latency")
    with pytest.raises(ValueError):
        metrics.Histogram("util_test_latency", boundaries=[0.0, 1.0])
    histogram = metrics.Histogram("util_test_latency", boundaries=[0.1, 1.0])
    histogram.observe(0.5)
    assert histogram.info["boundaries"] == [0.1, 1.0]
    gauge = metrics.Gauge("util_test_depth")
    gauge.set(3)
    gauge.set(None)  # ignored

    @ray_backend.remote
    class Recorder:
        def __init__(self):
            self.count = metrics.Counter("util_test_actor_calls")

        def call(self):
            self.count.inc()
            return "recorded"

    assert ray_backend.get(Recorder.remote().call.remote()) == "recorded"


def test_pdb_without_a_terminal_serves_a_session_on_a_local_port(monkeypatch, capsys):
    # rayreact's own mechanism (Ray's goes through its `ray debug` CLI), so checked on rayreact alone:
    # a worker has no terminal, so set_trace waits for a debugger client on a localhost port.
    import re
    import socket
    import time

    import rayreact.util.rpdb as rpdb

    monkeypatch.setattr("sys.stdin", io.StringIO())
    result = {}

    def debugged():
        x = 41
        rpdb.set_trace()
        result["value"] = x + 1

    thread = threading.Thread(target=debugged)
    thread.start()
    port, deadline = None, time.time() + 30
    while port is None and time.time() < deadline:
        found = re.search(r"RemotePdb session open at 127\.0\.0\.1:(\d+)", capsys.readouterr().err)
        port = int(found.group(1)) if found else time.sleep(0.05)
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(b"p x * 2\nc\n")
        thread.join(30)
        transcript = b""
        while chunk := client.recv(4096):
            transcript += chunk
    assert not thread.is_alive() and result == {"value": 42}
    assert b"82" in transcript
