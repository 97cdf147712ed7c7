"""get(timeout=...) raises GetTimeoutError (a TimeoutError); the value arrives later."""
import ray
from ray.exceptions import GetTimeoutError

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Signal:
    def __init__(self):
        import asyncio
        self.event = asyncio.Event()

    async def wait(self):
        await self.event.wait()
        return "signalled"

    async def send(self):
        self.event.set()


@ray.remote
def fast():
    return "fast"


s = Signal.remote()
pending = s.wait.remote()
try:
    ray.get(pending, timeout=0.2)
except GetTimeoutError as e:
    print("GetTimeoutError", isinstance(e, TimeoutError))
print(ray.get(fast.remote(), timeout=60))
ray.get(s.send.remote())
print(ray.get(pending, timeout=60))
ready, not_ready = ray.wait([s.wait.remote()], timeout=60)
print("wait after signal", len(ready), len(not_ready))
ray.shutdown()
