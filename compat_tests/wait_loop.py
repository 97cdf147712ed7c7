"""wait() loops: process results as they complete (order of completion is Ray's nondeterminism)."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def work(i):
    import time
    time.sleep(0.001 * (i % 5))
    return i * i


pending = [work.remote(i) for i in range(20)]
done = []
while pending:
    ready, pending = ray.wait(pending, num_returns=min(3, len(pending)))
    done.extend(ray.get(ready))
print("all results", sorted(done))

ready, rest = ray.wait([work.remote(i) for i in range(4)], num_returns=4)
print("wait for all", len(ready), len(rest))
ready, rest = ray.wait([ray.put(1), ray.put(2)], num_returns=1, timeout=10)
print("put refs are ready", len(ready), len(rest))
ray.shutdown()
