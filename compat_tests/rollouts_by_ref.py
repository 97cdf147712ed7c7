"""Rollouts handed to the learner by ref: the learner fetches the batches itself.

A common shape in RL code: rollout workers return sample batches, and the driver passes the
*list of refs* to the learner (``learner.update.remote(sample_refs)``) instead of fetching the
batches itself, so the samples go from the workers to the learner without a stop in the driver.
A ref inside a list is passed as a ref (Ray does not resolve it), and the learner calls
``ray.get`` on the list.  The new weights go back to the workers as a top-level ref.
"""
import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)

DIM = 6
NUM_WORKERS = 3
ITERATIONS = 60


@ray.remote
class RolloutWorker:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def sample(self, weights):
        obs = self.rng.standard_normal((16, DIM))
        returns = obs @ np.linspace(-1.0, 1.0, DIM) - obs @ weights
        return {"obs": obs, "returns": returns}


@ray.remote
class Learner:
    def __init__(self):
        self.weights = np.zeros(DIM)
        self.batches = 0

    def update(self, sample_refs):
        # The refs arrive unresolved: they were nested in a list.
        batches = ray.get(sample_refs)
        for batch in batches:
            self.weights = self.weights + 0.05 * batch["obs"].T @ batch["returns"] / len(batch["returns"])
            self.batches += 1
        return self.weights

    def stats(self):
        return self.batches


workers = [RolloutWorker.remote(10 + i) for i in range(NUM_WORKERS)]
learner = Learner.remote()
weights = ray.put(np.zeros(DIM))
norms = []
for i in range(ITERATIONS):
    samples = [w.sample.remote(weights) for w in workers]
    weights = learner.update.remote(samples)
    if i % 10 == 9:
        norms.append(round(float(np.linalg.norm(ray.get(weights))), 6))

final = ray.get(weights)
print("batches learned", ray.get(learner.stats.remote()))
print("weight norms every 10 iterations", norms)
print("final weights", np.round(final, 4).tolist())
ray.shutdown()
