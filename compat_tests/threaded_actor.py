"""Threaded actors (max_concurrency > 1): calls run concurrently on a thread pool."""
import threading

import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Barrier:
    def __init__(self, parties):
        self.barrier = threading.Barrier(parties)
        self.lock = threading.Lock()
        self.total = 0

    def arrive(self, x):
        # Only returns once `parties` calls run at the same time.
        self.barrier.wait(timeout=60)
        with self.lock:
            self.total += x
        return x

    def total_value(self):
        return self.total


b = Barrier.options(max_concurrency=4).remote(4)
print("arrived", sorted(ray.get([b.arrive.remote(i) for i in range(4)])))
print("total", ray.get(b.total_value.remote()))
print("again", sorted(ray.get([b.arrive.remote(i * 10) for i in range(4)])))
print("total", ray.get(b.total_value.remote()))
ray.shutdown()
