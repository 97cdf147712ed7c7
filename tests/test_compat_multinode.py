"""Multi-node through real Ray: rayreact connected to a real ``ray start --head`` cluster.

The module starts its own head node (2 CPUs, no dashboard, its own temp dir, on
this machine's addresses) and stops it by killing the process group it started:
``ray stop`` would also stop other people's Ray sessions on a shared machine.
The local test cluster has Ray's token authentication off (``RAY_AUTH_MODE=disabled``).

Every check runs a driver script in a subprocess, as a user would, and asserts
on what it prints; the scripts also check that the work ran in Ray's workers.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.timeout(600)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_env(address=None):
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    env.pop("RAYREACT_TRACE", None)
    if address is None:
        env.pop("RAY_ADDRESS", None)
    else:
        env["RAY_ADDRESS"] = address
    return env


def _processes_mentioning(text):
    out = subprocess.run(["pgrep", "-f", text], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


@pytest.fixture(scope="module")
def ray_head():
    """A real Ray head node on this machine; yields its address ("127.0.0.1:<port>")."""
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="rrh-", dir="/tmp")  # short: Ray's socket paths live under it
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    log = open(os.path.join(temp_dir, "ray-start.log"), "w")
    head = subprocess.Popen(
        [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         f"--temp-dir={temp_dir}", "--block"],
        env=_cluster_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_head(head, port, temp_dir)
        yield address
    finally:
        _stop_head(head, temp_dir)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_head(head, port, temp_dir, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError("ray start exited:\n" + open(os.path.join(temp_dir, "ray-start.log")).read())
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0 and _raylet_running(temp_dir):
                return
        time.sleep(0.5)
    raise RuntimeError("the Ray head node did not come up")


def _raylet_running(temp_dir):
    return any("raylet" in _cmdline(pid) for pid in _processes_mentioning(temp_dir))


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stop_head(head, temp_dir):
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (head.poll() is None or _processes_mentioning(temp_dir)):
            time.sleep(0.3)
        if head.poll() is not None and not _processes_mentioning(temp_dir):
            break
    for pid in _processes_mentioning(temp_dir):  # anything of ours that left the group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    head.wait(timeout=10)


def run_driver(source, address, env_address=True, args=(), via_cli=False, tmp_path=None):
    """Run a driver script against the cluster; return the JSON it printed after ``RESULT``."""
    path = os.path.join(tmp_path, "driver.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(source))
    cmd = ([sys.executable, "-m", "rayreact", "run", path, *args] if via_cli
           else [sys.executable, path, *args])
    proc = subprocess.run(cmd, env=_cluster_env(address if env_address else None), cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"driver failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT "):])


IN_RAY_WORKER = '''
def in_ray_worker():
    import sys
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.__name__ == "ray" and ray.is_initialized()
                and ray._private.worker.global_worker.mode == ray.WORKER_MODE)
'''


def test_delegate_runs_rayreact_objects_on_the_cluster(ray_head, tmp_path):
    # The delegate on its own: rayreact's remote objects get real Ray twins (to_ray), calls and
    # errors go through real Ray.
    result = run_driver(IN_RAY_WORKER + '''
import json, rayreact
from rayreact.compat import delegate

@rayreact.remote
def add(a, b):
    return a + b

@rayreact.remote
def checks():
    return in_ray_worker()

@rayreact.remote(num_cpus=1)
class Counter:
    def __init__(self, start):
        self.n = start
    def inc(self, k=1):
        self.n += k
        return self.n

@rayreact.remote
def fail():
    raise KeyError("boom")

import sys
rt = delegate.connect(sys.argv[1])     # a RayDelegate: the runtime protocol, by real Ray
out = {}
add_twin = delegate.to_ray(add)
out["same_twin"] = delegate.to_ray(add) is add_twin
out["chain"] = rt.get_values([add_twin.remote(add_twin.remote(1, 2), 3)], None)[0]
out["in_ray_worker"] = rt.get_values([delegate.to_ray(checks).remote()], None)[0]
c = delegate.to_ray(Counter).remote(10)
out["actor"] = rt.get_values([c.inc.remote(), c.inc.remote(5)], None)
ref = rt.put(7)
out["wait_put"] = [rt.wait_ids([ref], 1, 30, True), rt.get_values([ref], None)[0]]
try:
    rt.get_values([delegate.to_ray(fail).remote()], None)
except KeyError as e:
    import ray.exceptions, rayreact.exceptions
    out["error"] = [isinstance(e, ray.exceptions.RayTaskError), isinstance(e, rayreact.exceptions.RayTaskError)]
out["resources"] = rt.resources("total").get("CPU")
out["external_ids"] = [rt.external_id(ref, "object") is ref, rt.external_id(c, "actor") is c,
                       rt.external_id(ref, "actor"), rt.external_id("x", "object")]
rt.shutdown()
out["connected"] = delegate.connected()
print("RESULT " + json.dumps(out))
''', ray_head, env_address=False, args=(ray_head,), tmp_path=str(tmp_path))
    assert result == {"same_twin": True, "chain": 6, "in_ray_worker": True, "actor": [11, 16],
                      "wait_put": [[True], 7], "error": [True, True], "resources": 2.0,
                      "external_ids": [True, True, None, None], "connected": False}


FACADE_DRIVER = IN_RAY_WORKER + '''
import json, sys
import rayreact as ray

@ray.remote
def add(a, b):
    return a + b

@ray.remote
def nested(x):
    return ray.get(add.remote(x, 1)), in_ray_worker()

@ray.remote
class Counter:
    def __init__(self):
        self.n = 0
    def inc(self, k=1):
        self.n += k
        return self.n

@ray.remote
def use_counter(counter, refs):
    return ray.get(counter.inc.remote(10)), ray.get(refs[0])

@ray.remote
def fail():
    raise KeyError("boom")

ray.init(**({"address": sys.argv[1]} if len(sys.argv) > 1 else {}))
out = {}
out["where"] = ray.get(add.remote(0, 0)) == 0 and ray.get(nested.remote(5))
c = Counter.remote()
out["actor"] = [ray.get(c.inc.remote()) for _ in range(3)]
out["handle_and_nested_ref"] = ray.get(use_counter.remote(c, [ray.put("inside")]))
ready, rest = ray.wait([add.remote(1, 1), add.remote(2, 2)], num_returns=2, timeout=60)
out["wait"] = sorted(ray.get(ready))
try:
    ray.get(fail.remote())
except KeyError as e:
    out["error"] = isinstance(e, ray.exceptions.RayTaskError)
out["cluster_cpus"] = ray.cluster_resources().get("CPU")
ray.shutdown()
print("RESULT " + json.dumps(out))
'''
FACADE_EXPECTED = {"where": [6, True], "actor": [1, 2, 3], "handle_and_nested_ref": [13, "inside"],
                   "wait": [2, 4], "error": True, "cluster_cpus": 2.0}


def test_init_with_address_hands_every_call_to_ray(ray_head, tmp_path):
    result = run_driver(FACADE_DRIVER, ray_head, env_address=False, args=(ray_head,), tmp_path=str(tmp_path))
    assert result == FACADE_EXPECTED


def test_ray_address_environment_variable_connects_too(ray_head, tmp_path):
    assert run_driver(FACADE_DRIVER, ray_head, tmp_path=str(tmp_path)) == FACADE_EXPECTED


def test_unmodified_ray_script_under_rayreact_run_uses_the_cluster(ray_head, tmp_path):
    # `import ray` is rayreact's alias here; connecting must still reach the real cluster.
    source = FACADE_DRIVER.replace("import rayreact as ray", "import ray")
    assert run_driver(source, ray_head, via_cli=True, tmp_path=str(tmp_path)) == FACADE_EXPECTED


PROTOCOL_DRIVER = IN_RAY_WORKER + '''
import json, sys, time
import rayreact as ray

@ray.remote
class Named:
    def ping(self):
        return "pong"
    def ctx(self):
        c = ray.get_runtime_context()
        return c.get_actor_id() is not None, c.current_actor is not None
    def leave(self):
        ray.actor.exit_actor()

@ray.remote
def slow():
    import time
    time.sleep(600)

info = ray.init(address=sys.argv[1])
out = {"init_address": info["address"] == info.address_info["gcs_address"] != "rayreact://local"}
a = Named.options(name="svc").remote()
out["named"] = [ray.get(ray.get_actor("svc").ping.remote()), "svc" in ray.util.list_named_actors()]
try:
    ray.get_actor("nobody")
except ValueError:
    out["missing_actor"] = "ValueError"
out["actor_ctx"] = ray.get(a.ctx.remote())
ctx = ray.get_runtime_context()
out["driver_ctx"] = [type(ctx).__module__.partition(".")[0], ctx.get_job_id() is not None]
out["nodes"] = [n["Alive"] for n in ray.nodes()]
out["gpus"] = ray.get_gpu_ids()
ref = slow.remote()
ray.cancel(ref, force=True)
try:
    ray.get(ref, timeout=120)
except Exception as e:   # Ray's TaskCancelledError (or WorkerCrashedError with force), also rayreact's class
    out["cancelled"] = isinstance(e, ray.exceptions.RayError)
ray.kill(a)
# Ray's kill is asynchronous: a call sent just after it may still run; calls fail once it has landed.
deadline = time.time() + 120
while time.time() < deadline:
    try:
        ray.get(a.ping.remote(), timeout=120)
    except ray.exceptions.RayActorError:
        out["killed"] = True
        break
out["timeline"] = isinstance(ray.timeline(), list)
try:
    ray.kill("not an actor")
except ValueError:
    out["kill_checks"] = True
ray.shutdown()
out["shut"] = not ray.is_initialized()
print("RESULT " + json.dumps(out))
'''


def test_the_protocol_through_the_facade_on_ray(ray_head, tmp_path):
    result = run_driver(PROTOCOL_DRIVER, ray_head, env_address=False, args=(ray_head,), tmp_path=str(tmp_path))
    assert result == {"init_address": True, "named": ["pong", True], "missing_actor": "ValueError",
                      "actor_ctx": [True, True], "driver_ctx": ["ray", True], "nodes": [True], "gpus": [],
                      "cancelled": True, "killed": True, "timeline": True, "kill_checks": True, "shut": True}


COMPARED_DRIVER = '''
import sys
import ray

@ray.remote
def square(x):
    return x * x

@ray.remote
class Total:
    def __init__(self):
        self.sum = 0
    def add(self, x):
        self.sum += x
        return self.sum

ray.init(address=sys.argv[1])
total = Total.remote()
print("sum", ray.get([total.add.remote(v) for v in ray.get([square.remote(i) for i in range(6)])])[-1])
'''


def test_compare_traces_a_run_handed_to_the_cluster(ray_head, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(COMPARED_DRIVER)
    summary = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, "-m", "rayreact", "compare", "--ray-runs", "1", "--json", str(summary),
                           str(script), ray_head], env=_cluster_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    data = json.loads(summary.read_text())
    # 6 tasks, the actor's creation and its 6 calls, under Ray and under rayreact's delegate alike.
    assert [r["events"] for r in data["ray"]] == [13]
    assert [c["events"] for c in data["candidates"]] == [13]
    assert "EQUAL" in done.stdout
