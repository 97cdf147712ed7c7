"""Synchronized parallel Q-learning (DQN) on Blackjack-v1.

The third workload of the reactor-model RL paper. Each round:

1. 16 rollout actors each play 100 epsilon-greedy steps with the learner's
   current weights (sent by value, as numpy arrays);
2. the driver hands all transitions to a replay-buffer actor and asks it for a
   minibatch (500, 1000 or 2000 transitions);
3. the learner, a 3->32->2 torch MLP trained with Adam, takes one TD step in
   the driver.

The run is a fixed number of rounds per minibatch size, so its time is the
figure of merit. Every random choice is seeded, so the final weights (and their
checksum) are identical on every Ray-compatible backend.

    python dqn_blackjack.py --quick
    python dqn_blackjack.py --batch-sizes 500 1000 2000 --rounds 60
    python dqn_blackjack.py --serial   # the same computation in one process, without Ray
"""

import argparse
import json
import time
import zlib

import gymnasium as gym
import numpy as np
import ray
import torch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--rollout-actors", type=int, default=16)
    parser.add_argument("--steps-per-rollout", type=int, default=100)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--rounds", type=int, default=60, help="rounds per minibatch size")
    parser.add_argument("--buffer-capacity", type=int, default=50_000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--target-every", type=int, default=10, help="rounds between target-network syncs")
    parser.add_argument("--eval-episodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--serial", action="store_true", help="run the actors' code in this process, without Ray")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.rounds = min(args.rounds, 5)
        args.batch_sizes = args.batch_sizes[:1]
        args.rollout_actors = min(args.rollout_actors, 4)
        args.eval_episodes = min(args.eval_episodes, 200)
    return args


def encode(obs):
    """Blackjack's (player sum, dealer card, usable ace) scaled to about [0, 1]."""
    player, dealer, ace = obs
    return np.array([player / 32.0, dealer / 10.0, float(ace)], dtype=np.float32)


def q_values(weights, x):
    """The learner's MLP in numpy, so rollout actors need no torch."""
    w1, b1, w2, b2 = weights
    return np.maximum(x @ w1.T + b1, 0.0) @ w2.T + b2


class RolloutWorker:
    def __init__(self):
        self.env = gym.make("Blackjack-v1")

    def reset(self, seed):
        self.obs = encode(self.env.reset(seed=seed)[0])
        self.rng = np.random.default_rng(seed)

    def rollout(self, weights, epsilon, num_steps):
        obs = np.empty((num_steps, 3), np.float32)
        next_obs = np.empty((num_steps, 3), np.float32)
        actions = np.empty(num_steps, np.int64)
        rewards = np.empty(num_steps, np.float32)
        dones = np.empty(num_steps, np.float32)
        for t in range(num_steps):
            if self.rng.random() < epsilon:
                action = int(self.rng.integers(2))
            else:
                action = int(np.argmax(q_values(weights, self.obs)))
            raw_next, reward, terminated, truncated, _ = self.env.step(action)
            obs[t], actions[t], rewards[t], dones[t] = self.obs, action, reward, terminated
            next_obs[t] = encode(raw_next)
            self.obs = encode(self.env.reset()[0]) if terminated or truncated else next_obs[t]
        return {"obs": obs, "actions": actions, "rewards": rewards, "next_obs": next_obs, "dones": dones}


class ReplayBuffer:
    def __init__(self, capacity):
        self.capacity = capacity

    def reset(self, seed):
        self.storage = None
        self.size = 0
        self.next_slot = 0
        self.rng = np.random.default_rng(seed)

    def add(self, batches):
        for batch in batches:
            if self.storage is None:
                self.storage = {k: np.zeros((self.capacity,) + v.shape[1:], v.dtype) for k, v in batch.items()}
            n = len(batch["actions"])
            slots = (self.next_slot + np.arange(n)) % self.capacity
            for key, value in batch.items():
                self.storage[key][slots] = value
            self.next_slot = (self.next_slot + n) % self.capacity
            self.size = min(self.size + n, self.capacity)
        return self.size

    def sample(self, batch_size):
        index = self.rng.integers(0, self.size, size=batch_size)
        return {key: value[index] for key, value in self.storage.items()}


class QNetwork(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))

    def forward(self, x):
        return self.layers(x)

    def numpy_weights(self):
        return [p.detach().numpy().copy() for p in self.parameters()]


def td_step(q_net, target_net, optimizer, batch, gamma):
    # torch.tensor copies: arrays that come back from ray.get are read-only
    obs, next_obs, actions, rewards, dones = (
        torch.tensor(batch[key]) for key in ("obs", "next_obs", "actions", "rewards", "dones"))
    with torch.no_grad():
        target = rewards + gamma * (1.0 - dones) * target_net(next_obs).max(dim=1).values
    predicted = q_net(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
    loss = torch.nn.functional.smooth_l1_loss(predicted, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def greedy_return(weights, episodes, seed):
    env = gym.make("Blackjack-v1")
    total = 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(np.argmax(q_values(weights, encode(obs)))))
            total += reward
            done = terminated or truncated
    return total / episodes


class InProcess:
    """Stands in for an actor handle in --serial runs: ``handle.method.remote(...)`` runs the call here."""

    def __init__(self, obj):
        self._obj = obj

    def __getattr__(self, name):
        method = getattr(self._obj, name)
        return type("Method", (), {"remote": staticmethod(method)})


def train(args, workers, buffer, batch_size, get=ray.get):
    """One full training run at one minibatch size, from fresh seeds; returns its summary."""
    torch.manual_seed(args.seed)
    q_net, target_net = QNetwork(), QNetwork()
    target_net.load_state_dict(q_net.state_dict())
    optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr)
    # also waits until every actor is up, so the timing covers training only
    get([w.reset.remote(args.seed * 1000 + i) for i, w in enumerate(workers)] + [buffer.reset.remote(args.seed)])

    start = time.perf_counter()
    for round_index in range(args.rounds):
        epsilon = max(0.05, 1.0 - round_index / max(1, args.rounds * 0.7))
        weights = q_net.numpy_weights()
        rollouts = get([w.rollout.remote(weights, epsilon, args.steps_per_rollout) for w in workers])
        buffer.add.remote(rollouts)
        batch = get(buffer.sample.remote(batch_size))
        loss = td_step(q_net, target_net, optimizer, batch, args.gamma)
        if (round_index + 1) % args.target_every == 0:
            target_net.load_state_dict(q_net.state_dict())
    train_s = time.perf_counter() - start

    weights = q_net.numpy_weights()
    checksum = 0
    for w in weights:
        checksum = zlib.crc32(np.ascontiguousarray(w).tobytes(), checksum)
    env_steps = args.rounds * args.rollout_actors * args.steps_per_rollout
    return {
        "batch_size": batch_size,
        "rounds": args.rounds,
        "train_s": train_s,
        "env_steps_per_s": env_steps / train_s,
        "final_loss": loss,
        "greedy_return": greedy_return(weights, args.eval_episodes, args.seed + 7),
        "checksum": f"{checksum:08x}",
    }


def main():
    args = parse_args()
    torch.set_num_threads(1)
    if args.serial:
        workers = [InProcess(RolloutWorker()) for _ in range(args.rollout_actors)]
        buffer = InProcess(ReplayBuffer(args.buffer_capacity))
        get = lambda values: values  # noqa: E731  (calls already ran)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
        workers = [ray.remote(RolloutWorker).remote() for _ in range(args.rollout_actors)]
        buffer = ray.remote(ReplayBuffer).remote(args.buffer_capacity)
        get = ray.get
    runs = []
    for batch_size in args.batch_sizes:
        run = train(args, workers, buffer, batch_size, get)
        runs.append(run)
        print(f"batch {batch_size}: {run['rounds']} rounds in {run['train_s']:.2f} s, "
              f"loss {run['final_loss']:.4f}, greedy return {run['greedy_return']:+.3f}, checksum {run['checksum']}")
    if not args.serial:
        ray.shutdown()

    checksum = 0
    for run in runs:
        checksum = zlib.crc32(run["checksum"].encode(), checksum)
    summary = {
        "example": "dqn_blackjack",
        "backend": "serial" if args.serial else ray.__name__,
        "runs": runs,
        "total_train_s": sum(r["train_s"] for r in runs),
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    returns = ", ".join(f"{r['greedy_return']:+.3f}" for r in runs)
    sizes = ", ".join(str(r["batch_size"]) for r in runs)
    print(f"result: greedy returns {returns} for batch sizes {sizes}")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {sum(r['rounds'] for r in runs)} rounds in {summary['total_train_s']:.2f} s "
          f"({np.mean([r['env_steps_per_s'] for r in runs]):.0f} env steps/s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
