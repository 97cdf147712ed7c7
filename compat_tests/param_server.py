"""A synchronous parameter server: gradient refs go straight into the server."""
import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class ParameterServer:
    def __init__(self, dim):
        self.weights = np.zeros(dim)

    def apply(self, *grads):
        self.weights -= 0.1 * np.sum(grads, axis=0)
        return self.weights

    def get(self):
        return self.weights


@ray.remote
class DataWorker:
    def __init__(self, seed, dim):
        rng = np.random.default_rng(seed)
        self.target = rng.standard_normal(dim)

    def gradient(self, weights):
        return weights - self.target


dim = 16
ps = ParameterServer.remote(dim)
workers = [DataWorker.remote(i, dim) for i in range(3)]
weights = ps.get.remote()
for step in range(40):
    grads = [w.gradient.remote(weights) for w in workers]
    weights = ps.apply.remote(*grads)
final = ray.get(weights)
print("final weights", np.round(final, 6).tolist())
ray.shutdown()
