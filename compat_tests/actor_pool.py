"""ray.util.ActorPool: ordered map, submit/get_next, and pool bookkeeping."""
import ray
from ray.util import ActorPool

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Worker:
    def __init__(self, offset):
        self.offset = offset
        self.calls = 0

    def work(self, x):
        self.calls += 1
        return x * 10 + self.offset

    def count(self):
        return self.calls


workers = [Worker.remote(i) for i in range(2)]
pool = ActorPool(workers)
print("map", list(pool.map(lambda a, v: a.work.remote(v), range(8))))
for v in range(4):
    pool.submit(lambda a, v: a.work.remote(v), v + 100)
out = []
while pool.has_next():
    out.append(pool.get_next())
print("submit/get_next", out)
print("has_free", pool.has_free())
print("calls per worker", ray.get([w.count.remote() for w in workers]))
ray.shutdown()
