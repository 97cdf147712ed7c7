"""ray.util.multiprocessing.Pool: map, imap, starmap, apply_async."""
import ray
from ray.util.multiprocessing import Pool

ray.init(num_cpus=2, include_dashboard=False)


def cube(x):
    return x ** 3


def power(x, p):
    return x ** p


with Pool(processes=2) as pool:
    print("map", pool.map(cube, range(10)))
    print("imap", list(pool.imap(cube, range(5))))
    print("imap_unordered sorted", sorted(pool.imap_unordered(cube, range(5))))
    print("starmap", pool.starmap(power, [(2, 3), (3, 2), (4, 0)]))
    result = pool.apply_async(power, (5, 2))
    print("apply_async", result.get(timeout=60))
    print("apply", pool.apply(cube, (6,)))
ray.shutdown()
