"""A small RL-style loop: environment actors step with actions from a policy task, repeatedly.

The same calls repeat every iteration: the pattern rayreact's reactor replays.
"""
import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Env:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.standard_normal(4)
        self.t = 0

    def reset(self):
        self.state = self.rng.standard_normal(4)
        self.t = 0
        return self.state

    def step(self, action):
        self.state = 0.9 * self.state + 0.1 * action
        self.t += 1
        reward = -float(np.square(self.state).sum())
        done = self.t >= 25
        return self.state, reward, done


@ray.remote
def policy(weights, obs):
    return np.tanh(weights @ obs)


weights = ray.put(np.eye(4) * -0.5)
envs = [Env.remote(seed) for seed in range(3)]
observations = ray.get([e.reset.remote() for e in envs])
returns = [0.0, 0.0, 0.0]
for t in range(25):
    actions = [policy.remote(weights, obs) for obs in observations]
    results = ray.get([e.step.remote(a) for e, a in zip(envs, actions)])
    observations = [r[0] for r in results]
    returns = [ret + r[1] for ret, r in zip(returns, results)]
print("returns", [round(r, 6) for r in returns])
print("done", [r[2] for r in results])
ray.shutdown()
