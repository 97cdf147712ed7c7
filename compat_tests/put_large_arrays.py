"""put() of large numpy arrays, passed to tasks and actors; values are read-only snapshots."""
import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def checksum(arr):
    return float(arr.sum()), arr.shape, str(arr.dtype), bool(arr.flags.writeable)


@ray.remote
def add_noise(arr, seed):
    rng = np.random.default_rng(seed)
    return arr + rng.standard_normal(arr.shape).astype(arr.dtype)


@ray.remote
class Accumulator:
    def __init__(self, shape):
        self.total = np.zeros(shape)

    def add(self, arr):
        self.total += arr
        return float(self.total.sum())


big = np.arange(2_000_000, dtype=np.float64).reshape(1000, 2000)
ref = ray.put(big)
big[0, 0] = -1.0  # the put value is a snapshot: this must not be seen
print("checksum", ray.get(checksum.remote(ref)))
got = ray.get(ref)
print("get is read-only", not got.flags.writeable, got[0, 0])
noisy = ray.get(add_noise.remote(ref, 7))
print("noisy", round(float(noisy.sum()), 3))
acc = Accumulator.remote(big.shape)
frames = [ray.put(np.full((1000, 2000), i, dtype=np.float64)) for i in range(5)]
print("accumulated", ray.get([acc.add.remote(f) for f in frames]))
images = ray.put(np.ones((64, 84, 84), dtype=np.uint8))
print("uint8 frames", ray.get(checksum.remote(images)))
ray.shutdown()
