"""Ape-X-style distributed DQN on CartPole: explorers, a replay buffer, a learner.

Explorer actors step their own CartPole env with epsilon-greedy policies (each
a different epsilon, as in Ape-X) and push their transitions straight into a
replay-buffer actor (an actor-to-actor call the driver never sees). A learner
actor trains a torch Q-network on minibatches that the driver routes from the
buffer to the learner *as refs*, so the batch data itself never passes through
the driver. The driver is a ``ray.wait`` loop over a dict of in-flight refs:

* an explorer finished a chunk -> start its next chunk with the latest weights;
* the learner finished a step -> feed it the next ``buffer.sample.remote()``;
* every few learner steps the explorers' weights ref is refreshed;
* explorers that run too far ahead of the learner (more than
  ``--env-steps-per-update`` env steps per learner step) pause until it
  catches up, so on a small machine the learner is not starved of CPU.

Which call finishes first depends on timing, so results vary between runs (no
checksum); the greedy return of the final network is the result.

    python apex_replay.py --quick
    python apex_replay.py --explorers 4 --learner-steps 2000
"""

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import ray
import torch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--explorers", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=100, help="env steps per explorer call")
    parser.add_argument("--learner-steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--env-steps-per-update", type=int, default=16, help="replay ratio cap")
    parser.add_argument("--warmup", type=int, default=1000, help="transitions in the buffer before learning")
    parser.add_argument("--weights-every", type=int, default=25, help="learner steps between weight broadcasts")
    parser.add_argument("--target-every", type=int, default=200, help="learner steps between target syncs")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.learner_steps = min(args.learner_steps, 30)
        args.warmup = min(args.warmup, 300)
        args.eval_episodes = min(args.eval_episodes, 2)
        args.explorers = min(args.explorers, 2)
    return args


def q_network():
    return torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))


def greedy_action(weights, obs):
    """The Q-network's forward pass in numpy, so explorers need no torch graph."""
    w1, b1, w2, b2 = weights
    return int(np.argmax(np.maximum(obs @ w1.T + b1, 0.0) @ w2.T + b2))


@ray.remote
class ReplayBuffer:
    def __init__(self, capacity, seed):
        self.capacity = capacity
        self.storage = {"obs": np.zeros((capacity, 4), np.float32), "next_obs": np.zeros((capacity, 4), np.float32),
                        "actions": np.zeros(capacity, np.int64), "rewards": np.zeros(capacity, np.float32),
                        "dones": np.zeros(capacity, np.float32)}
        self.size = self.next_slot = self.added = 0
        self.rng = np.random.default_rng(seed)

    def add(self, batch):
        n = len(batch["actions"])
        slots = (self.next_slot + np.arange(n)) % self.capacity
        for key, value in batch.items():
            self.storage[key][slots] = value
        self.next_slot = (self.next_slot + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.added += n

    def sample(self, batch_size):
        index = self.rng.integers(0, self.size, size=batch_size)
        return {key: value[index] for key, value in self.storage.items()}

    def stats(self):
        return {"size": self.size, "added": self.added}


@ray.remote
class Explorer:
    def __init__(self, buffer, epsilon, seed):
        self.buffer = buffer
        self.epsilon = epsilon
        self.env = gym.make("CartPole-v1")
        self.obs, _ = self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.episode_return = 0.0
        self.finished_returns = []
        self.last_add = None

    def explore(self, weights, num_steps):
        batch = {"obs": np.zeros((num_steps, 4), np.float32), "next_obs": np.zeros((num_steps, 4), np.float32),
                 "actions": np.zeros(num_steps, np.int64), "rewards": np.zeros(num_steps, np.float32),
                 "dones": np.zeros(num_steps, np.float32)}
        for t in range(num_steps):
            if weights is None or self.rng.random() < self.epsilon:
                action = int(self.rng.integers(2))
            else:
                action = greedy_action(weights, self.obs)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            batch["obs"][t], batch["actions"][t], batch["rewards"][t] = self.obs, action, reward
            batch["next_obs"][t], batch["dones"][t] = next_obs, terminated
            self.episode_return += reward
            self.obs = next_obs
            if terminated or truncated:
                self.finished_returns.append(self.episode_return)
                self.episode_return = 0.0
                self.obs, _ = self.env.reset()
        self.last_add = self.buffer.add.remote(batch)
        returns, self.finished_returns = self.finished_returns, []
        return num_steps, returns

    def flush(self):
        """Wait until the buffer holds everything this explorer pushed."""
        if self.last_add is not None:
            ray.get(self.last_add)
        return True


@ray.remote
class Learner:
    def __init__(self, lr, gamma, target_every, seed):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.q, self.target = q_network(), q_network()
        self.target.load_state_dict(self.q.state_dict())
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.gamma = gamma
        self.target_every = target_every
        self.steps = 0

    def train(self, batch):
        obs, next_obs, actions, rewards, dones = (
            torch.tensor(batch[k]) for k in ("obs", "next_obs", "actions", "rewards", "dones"))
        with torch.no_grad():
            target = rewards + self.gamma * (1.0 - dones) * self.target(next_obs).max(dim=1).values
        predicted = self.q(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = torch.nn.functional.smooth_l1_loss(predicted, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.steps += 1
        if self.steps % self.target_every == 0:
            self.target.load_state_dict(self.q.state_dict())
        return loss.item()

    def get_weights(self):
        return [p.detach().numpy().copy() for p in self.q.parameters()]


def evaluate(weights, episodes, seed):
    env = gym.make("CartPole-v1")
    total = 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(greedy_action(weights, obs))
            total += reward
            done = terminated or truncated
    return total / episodes


def main():
    args = parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    buffer = ReplayBuffer.remote(100_000, args.seed)
    epsilons = [0.4 ** (1 + 7 * i / max(1, args.explorers - 1)) for i in range(args.explorers)]
    explorers = [Explorer.remote(buffer, eps, args.seed * 100 + i) for i, eps in enumerate(epsilons)]
    learner = Learner.remote(args.lr, args.gamma, args.target_every, args.seed)
    ray.get([buffer.stats.remote(), learner.get_weights.remote()])

    # Warm up with random actions until the buffer can serve a minibatch: a fixed number of rounds, one
    # explorer at a time, each push landed before the next explorer starts, so the buffer's first contents
    # do not depend on which explorer is faster.
    for _ in range(-(-args.warmup // (args.explorers * args.chunk))):
        for e in explorers:
            ray.get(e.explore.remote(None, args.chunk))
            ray.get(e.flush.remote())

    start = time.perf_counter()
    weights = learner.get_weights.remote()
    in_flight = {e.explore.remote(weights, args.chunk): ("explore", e) for e in explorers}
    in_flight[learner.train.remote(buffer.sample.remote(args.batch_size))] = ("learn", learner)
    learner_steps, env_steps, losses, episode_returns = 0, 0, [], []
    paused = []

    def explorers_ahead():
        return env_steps > (learner_steps + 1) * args.env_steps_per_update

    while learner_steps < args.learner_steps:
        [ready], _ = ray.wait(list(in_flight))
        kind, actor = in_flight.pop(ready)
        if kind == "explore":
            steps, returns = ray.get(ready)
            env_steps += steps
            episode_returns.extend(returns)
            if explorers_ahead():
                paused.append(actor)
            else:
                in_flight[actor.explore.remote(weights, args.chunk)] = ("explore", actor)
        else:
            losses.append(ray.get(ready))
            learner_steps += 1
            if learner_steps % args.weights_every == 0:
                weights = learner.get_weights.remote()
            in_flight[learner.train.remote(buffer.sample.remote(args.batch_size))] = ("learn", learner)
            while paused and not explorers_ahead():
                explorer = paused.pop(0)
                in_flight[explorer.explore.remote(weights, args.chunk)] = ("explore", explorer)
    final_weights = ray.get(learner.get_weights.remote())
    ray.wait(list(in_flight), num_returns=len(in_flight))  # let the last calls finish before shutting down
    elapsed = time.perf_counter() - start
    ray.shutdown()

    greedy = evaluate(final_weights, args.eval_episodes, args.seed + 12345)
    recent = episode_returns[-20:]
    summary = {
        "example": "apex_replay",
        "backend": ray.__name__,
        "learner_steps": learner_steps,
        "env_steps": env_steps,
        "final_loss": float(np.mean(losses[-20:])),
        "recent_explorer_return": float(np.mean(recent)) if recent else None,
        "greedy_return": greedy,
        "train_s": elapsed,
        "env_steps_per_s": env_steps / elapsed,
        "learner_steps_per_s": learner_steps / elapsed,
        "checksum": None,
        "deterministic": False,
    }
    print(f"result: greedy return {greedy:.1f} after {learner_steps} learner steps on {env_steps} env steps")
    print(f"throughput: {summary['env_steps_per_s']:.0f} env steps/s, "
          f"{summary['learner_steps_per_s']:.1f} learner steps/s ({elapsed:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
