"""Multi-agent inference: one torch policy actor per agent, env in the driver.

The fourth workload of the reactor-model RL paper. Every step the driver sends
the *joint* observation of all agents to every policy actor (a 64-unit torch
MLP, one per agent) and gathers one action from each:

    actions = ray.get([policy.act.remote(joint_obs) for policy in policies])

The paper uses ma-gym's TrafficJunction, whose joint observation has 324 floats
with 4 agents and 1,350 with 10. ma-gym pins gym<=0.20 and cloudpickle==2.0,
which do not install next to gymnasium 1.x, so this script carries its own
small traffic junction with the same observation layout: each car sees the
3x3 cells around it, and each occupied cell holds that car's one-hot id, its
normalized (row, col) and its one-hot route, i.e. 9 * (n + 5) floats per car.
Cars drive (gas/brake) along fixed routes through a four-way crossing; two cars
in one cell collide.

Policies act greedily and everything is seeded, so the action checksum is the
same on every Ray-compatible backend.

    python marl_inference.py --quick
    python marl_inference.py --agents 4 10 --steps 1000
    python marl_inference.py --serial     # the same policies in this process, no Ray (the floor)
"""

import argparse
import json
import time
import zlib

import numpy as np
import ray
import torch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--agents", type=int, nargs="+", default=[4, 10], help="one run per agent count")
    parser.add_argument("--steps", type=int, default=1000, help="env steps per run")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--serial", action="store_true", help="the same policies in this process, without Ray")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.steps = min(args.steps, 40)
        args.agents = sorted({min(n, 4) for n in args.agents})
    return args


class TrafficJunction:
    """A four-way crossing of two two-lane roads; cars enter, drive their route, leave.

    Actions per car: 0 = gas (advance one cell), 1 = brake (stay).
    Reward per car and step: -0.01 per step on the road, -10 per collision.
    """

    GAS, BRAKE = 0, 1
    ROUTES = 3

    def __init__(self, num_agents, grid=14, arrive_prob=0.5, max_steps=40, seed=0):
        self.n = num_agents
        self.grid = grid
        self.arrive_prob = arrive_prob
        self.max_steps = max_steps
        self.rng = np.random.default_rng(seed)
        self.paths = self._all_paths()
        self.features = self.n + 2 + self.ROUTES
        self.obs_size = self.n * 9 * self.features

    def _lanes(self):
        g, mid = self.grid, self.grid // 2
        # (entry lane, its cells in driving order)
        return [
            [(mid, c) for c in range(g)],               # eastbound
            [(mid - 1, c) for c in reversed(range(g))],  # westbound
            [(r, mid - 1) for r in range(g)],            # southbound
            [(r, mid) for r in reversed(range(g))],      # northbound
        ]

    def _all_paths(self):
        """paths[lane][route]: straight on, or turn into one of the two crossing lanes."""
        lanes = self._lanes()
        crossing = {0: (2, 3), 1: (2, 3), 2: (0, 1), 3: (0, 1)}
        paths = []
        for i, lane in enumerate(lanes):
            routes = [lane]
            for j in crossing[i]:
                other = lanes[j]
                meet = next(cell for cell in lane if cell in other)
                routes.append(lane[:lane.index(meet) + 1] + other[other.index(meet) + 1:])
            paths.append(routes)
        return paths

    def reset(self):
        self.step_count = 0
        self.active = np.zeros(self.n, bool)
        self.lane = np.zeros(self.n, int)
        self.route = np.zeros(self.n, int)
        self.progress = np.zeros(self.n, int)
        self._admit_cars()
        return self._observe()

    def _position(self, i):
        return self.paths[self.lane[i]][self.route[i]][self.progress[i]]

    def _admit_cars(self):
        occupied = {self._position(i) for i in range(self.n) if self.active[i]}
        for i in range(self.n):
            if not self.active[i] and self.rng.random() < self.arrive_prob:
                lane = int(self.rng.integers(4))
                if self.paths[lane][0][0] in occupied:
                    continue
                self.active[i], self.lane[i] = True, lane
                self.route[i], self.progress[i] = int(self.rng.integers(self.ROUTES)), 0
                occupied.add(self._position(i))

    def _observe(self):
        own = np.zeros((self.n, self.features), np.float32)
        cells = {}
        for i in np.flatnonzero(self.active):
            row, col = self._position(i)
            own[i, i] = 1.0
            own[i, self.n:self.n + 2] = row / (self.grid - 1), col / (self.grid - 1)
            own[i, self.n + 2 + self.route[i]] = 1.0
            cells.setdefault((row, col), i)
        views = np.zeros((self.n, 3, 3, self.features), np.float32)
        for i in np.flatnonzero(self.active):
            row, col = self._position(i)
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    other = cells.get((row + dr, col + dc))
                    if other is not None:
                        views[i, dr + 1, dc + 1] = own[other]
        return views.reshape(-1)  # the joint observation, n * 9 * (n + 5) floats

    def step(self, actions):
        rewards = np.zeros(self.n, np.float32)
        for i in np.flatnonzero(self.active):
            rewards[i] -= 0.01 * (self.progress[i] + 1)
            if actions[i] == self.GAS:
                self.progress[i] += 1
                if self.progress[i] == len(self.paths[self.lane[i]][self.route[i]]):
                    self.active[i] = False  # left the grid
        positions = {}
        for i in np.flatnonzero(self.active):
            positions.setdefault(self._position(i), []).append(i)
        collisions = 0
        for cars in positions.values():
            if len(cars) > 1:
                collisions += len(cars)
                rewards[cars] -= 10.0
        self._admit_cars()
        self.step_count += 1
        return self._observe(), rewards, self.step_count >= self.max_steps, collisions


class Policy:
    """One agent's policy: joint observation -> 64 -> 2 logits, greedy action."""

    def __init__(self, agent_index, obs_size, hidden, seed):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.agent_index = agent_index
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_size, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2))

    def act(self, joint_obs):
        with torch.no_grad():
            logits = self.net(torch.tensor(joint_obs))  # copies: received arrays are read-only
        return int(torch.argmax(logits))


PolicyActor = ray.remote(Policy)


def run(args, num_agents):
    env = TrafficJunction(num_agents, grid=14 if num_agents <= 4 else 18, seed=args.seed)
    make = Policy if args.serial else PolicyActor.remote
    policies = [make(i, env.obs_size, args.hidden, args.seed * 100 + i) for i in range(num_agents)]
    if args.serial:
        def act(obs):
            return [p.act(obs) for p in policies]
    else:
        def act(obs):
            return ray.get([p.act.remote(obs) for p in policies])
    joint_obs = env.reset()
    act(joint_obs)  # all actors up before timing

    checksum = 0
    episodes, total_reward, collisions = 0, 0.0, 0
    start = time.perf_counter()
    for _ in range(args.steps):
        actions = act(joint_obs)
        checksum = zlib.crc32(bytes(actions), checksum)
        joint_obs, rewards, done, crashed = env.step(actions)
        total_reward += float(rewards.sum())
        collisions += crashed
        if done:
            episodes += 1
            joint_obs = env.reset()
    elapsed = time.perf_counter() - start
    if not args.serial:
        for policy in policies:
            ray.kill(policy)
    return {
        "agents": num_agents,
        "obs_size": env.obs_size,
        "steps": args.steps,
        "episodes": episodes,
        "mean_episode_reward": total_reward / max(1, episodes),
        "collisions": collisions,
        "loop_s": elapsed,
        "steps_per_s": args.steps / elapsed,
        "actions_per_s": args.steps * num_agents / elapsed,
        "checksum": f"{checksum:08x}",
    }


def main():
    args = parse_args()
    torch.set_num_threads(1)
    if not args.serial:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    runs = []
    for num_agents in args.agents:
        result = run(args, num_agents)
        runs.append(result)
        print(f"{num_agents} agents (joint obs {result['obs_size']}): {result['steps_per_s']:.1f} env steps/s, "
              f"{result['episodes']} episodes, {result['collisions']} collisions, checksum {result['checksum']}")
    if not args.serial:
        ray.shutdown()

    checksum = 0
    for result in runs:
        checksum = zlib.crc32(result["checksum"].encode(), checksum)
    summary = {
        "example": "marl_inference",
        "backend": "serial" if args.serial else ray.__name__,
        "runs": runs,
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    print("result: " + "; ".join(f"{r['agents']} agents mean episode reward {r['mean_episode_reward']:.2f}" for r in runs))
    print(f"checksum: {summary['checksum']}")
    print("throughput: " + "; ".join(f"{r['agents']} agents {r['steps_per_s']:.1f} env steps/s" for r in runs))
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
