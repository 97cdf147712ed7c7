"""Plain tasks: positional and keyword arguments, defaults, varargs, many small calls."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def square(x):
    return x * x


@ray.remote
def describe(a, b=10, *rest, scale=1, **extra):
    return {"a": a, "b": b, "rest": list(rest), "scale": scale, "extra": sorted(extra)}


@ray.remote
def nothing():
    return None


print("squares", ray.get([square.remote(i) for i in range(20)]))
print("describe", ray.get(describe.remote(1)))
print("describe", ray.get(describe.remote(1, 2, 3, 4, scale=3, z=1, y=2)))
print("none", ray.get(nothing.remote()))
total = 0
for round_ in range(30):
    total += sum(ray.get([square.remote(round_ + k) for k in range(4)]))
print("total", total)
try:
    square.remote()
except TypeError:
    print("arity error raised at submission")
ray.shutdown()
