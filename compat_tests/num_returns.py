"""Multiple return values: num_returns on tasks, on .options(), and on actor methods."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote(num_returns=3)
def split3(x):
    return x, x + 1, x + 2


@ray.remote
def pair(x):
    return x, -x


@ray.remote
class Stats:
    @ray.method(num_returns=2)
    def min_max(self, values):
        return min(values), max(values)

    def mean(self, values):
        return sum(values) / len(values)


a, b, c = split3.remote(10)
print("split3", ray.get([a, b, c]))
p, q = pair.options(num_returns=2).remote(4)
print("pair", ray.get(p), ray.get(q))
s = Stats.remote()
lo, hi = s.min_max.remote([3, 1, 4, 1, 5, 9, 2, 6])
print("min_max", ray.get(lo), ray.get(hi))
print("mean", ray.get(s.mean.remote([1, 2, 3, 4])))
refs = [split3.remote(i) for i in range(5)]
print("many", [ray.get(list(r)) for r in refs])
zero = split3.options(num_returns=1).remote(0)
print("as one", ray.get(zero))
ray.shutdown()
