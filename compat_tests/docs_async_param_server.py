"""Docs-style asynchronous parameter server: each gradient is applied as soon as it is ready.

Worker actors hold shards of a noise-free linear regression problem.  The driver keeps one
gradient in flight per worker, takes whichever finishes first (``ray.wait``), hands that
ref straight to the server, and sends the worker the server's new weights.  Which worker
finishes first follows timing, so the sequence of updates differs from run to run; what is
printed does not: update counts, and the weights and loss once training has converged
(rounded far above the remaining error).  Each shard is well conditioned on its own, so
training converges whatever the order, even if one worker's gradients win every race.
A task evaluates the model at the end.
"""
import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)

TRUE_WEIGHTS = np.array([1.5, -2.0, 0.75, 3.0, -1.25, 0.5, 2.25, -0.5])
DIM = len(TRUE_WEIGHTS)
NUM_WORKERS = 3
NUM_UPDATES = 240
LEARNING_RATE = 0.3


def make_shard(seed, rows=256):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, DIM))
    return x, x @ TRUE_WEIGHTS


@ray.remote
class ParameterServer:
    def __init__(self, dim, lr):
        self.weights = np.zeros(dim)
        self.lr = lr
        self.updates = 0

    def apply_gradient(self, grad):
        self.weights = self.weights - self.lr * grad
        self.updates += 1
        return self.weights

    def get_weights(self):
        return self.weights

    def num_updates(self):
        return self.updates


@ray.remote
class DataWorker:
    def __init__(self, seed):
        self.x, self.y = make_shard(seed)
        self.computed = 0

    def compute_gradient(self, weights):
        self.computed += 1
        return self.x.T @ (self.x @ weights - self.y) / len(self.y)

    def num_computed(self):
        return self.computed


@ray.remote
def evaluate(weights, seed):
    x, y = make_shard(seed, rows=512)
    return float(np.mean((x @ weights - y) ** 2))


ps = ParameterServer.remote(DIM, LEARNING_RATE)
workers = [DataWorker.remote(100 + i) for i in range(NUM_WORKERS)]

weights = ps.get_weights.remote()
in_flight = {w.compute_gradient.remote(weights): w for w in workers}
applied = 0
while applied < NUM_UPDATES:
    [grad_ref], _ = ray.wait(list(in_flight), num_returns=1)
    worker = in_flight.pop(grad_ref)
    weights = ps.apply_gradient.remote(grad_ref)
    applied += 1
    in_flight[worker.compute_gradient.remote(weights)] = worker
ray.get(list(in_flight))  # let the last gradients finish; they are not applied

final = ray.get(ps.get_weights.remote())
loss = ray.get(evaluate.remote(final, seed=999))
print("updates applied", ray.get(ps.num_updates.remote()))
print("gradients computed", sum(ray.get([w.num_computed.remote() for w in workers])))
print("weights", np.round(final, 3).tolist())
print("matches the true weights", bool(np.allclose(final, TRUE_WEIGHTS, atol=1e-6)))
print("test loss below 1e-9", loss < 1e-9)
ray.shutdown()
