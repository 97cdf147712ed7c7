"""Chains of tasks: each ObjectRef passed straight into the next call is resolved first."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def inc(x):
    return x + 1


@ray.remote
def add(a, b):
    return a + b


@ray.remote
def scale(x, factor):
    return [v * factor for v in x]


ref = ray.put(0)
for _ in range(100):
    ref = inc.remote(ref)
print("chain of 100", ray.get(ref))

# A diamond: two branches from one source, joined.
src = inc.remote(10)
left, right = inc.remote(src), add.remote(src, 5)
print("diamond", ray.get(add.remote(left, right)))

# A list through a pipeline of stages.
data = ray.put(list(range(8)))
for factor in (2, 3, 5):
    data = scale.remote(data, factor)
print("pipeline", ray.get(data))
ray.shutdown()
