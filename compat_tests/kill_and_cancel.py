"""ray.kill on actors and ray.cancel on a task that has not started (both CPUs are busy)."""
import ray
from ray.exceptions import RayActorError, TaskCancelledError

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Gate:
    def __init__(self):
        import threading
        self.event = threading.Event()

    def wait(self):
        self.event.wait(60)
        return "opened"

    def open(self):
        self.event.set()
        return True


@ray.remote(num_cpus=1)
def hold(gate):
    return ray.get(gate.wait.remote())


@ray.remote(num_cpus=1)
def queued_task():
    return "ran"


@ray.remote
class Service:
    def ping(self, i):
        return i


gate = Gate.options(max_concurrency=4, num_cpus=0).remote()
holders = [hold.remote(gate) for _ in range(2)]  # take both CPUs
queued = queued_task.remote()  # no CPU left: it waits, never starts
ray.cancel(queued)
try:
    ray.get(queued)
except TaskCancelledError:
    print("cancelled before start: TaskCancelledError")
ray.get(gate.open.remote())
print(ray.get(holders))

svc = Service.remote()
print("pings", ray.get([svc.ping.remote(i) for i in range(3)]))
ray.kill(svc)
# Ray's kill is asynchronous (a call sent right after it may still run there); wait until the
# actor is gone, so both runtimes take the same path.
import time
while True:
    ready, _ = ray.wait([svc.__ray_ready__.remote()], timeout=10)
    try:
        ray.get(ready)
    except RayActorError:
        break
    time.sleep(0.05)
try:
    ray.get(svc.ping.remote(99))
except RayActorError:
    print("killed: RayActorError")
ray.shutdown()
