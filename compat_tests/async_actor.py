"""Async actors: coroutines run concurrently on the actor's event loop."""
import asyncio

import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class AsyncBatcher:
    def __init__(self):
        self.pending = []
        self.ready = asyncio.Event()

    async def add(self, x):
        self.pending.append(x)
        if len(self.pending) >= 3:
            self.ready.set()
        await self.ready.wait()
        return sorted(self.pending)

    async def echo(self, x):
        await asyncio.sleep(0.001)
        return x


a = AsyncBatcher.remote()
# Three concurrent calls: each waits until all three arrived.
print("batch", ray.get([a.add.remote(i) for i in range(3)]))
print("echo", ray.get([a.echo.remote(i) for i in range(10)]))
b = AsyncBatcher.options(max_concurrency=2).remote()
print("echo limited", ray.get([b.echo.remote(i) for i in range(6)]))
ray.shutdown()
