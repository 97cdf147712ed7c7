"""Multi-agent chain: the env is an actor, and values flow worker to worker.

Each step the env actor returns the joint observation; one small task per agent
picks that agent's view out of it; the agent's torch policy actor turns the view
into an action; the env actor's next step takes every agent's action:

    obs_ref = env.reset.remote()
    for _ in range(steps):
        views = [own_view.remote(obs_ref, i, n) for i in range(n)]     # tasks
        actions = [p.act.remote(v) for p, v in zip(policies, views)]   # policy actors
        obs_ref = env.step.remote(*actions)                            # the env actor

The driver only passes refs: it never reads an observation or an action until
the end.  Every value goes from the worker that made it to the workers that read
it, which is what the reactor model wires once and replays (RAYREACT_EXPLAIN=1
shows the share of calls replayed).  The env (the traffic junction of
marl_inference.py) keeps the action checksum, so it is the same on every
Ray-compatible backend.

    python marl_chain.py --quick
    python marl_chain.py --agents 10 --steps 1000
    python marl_chain.py --serial          # the same work in this process, no runtime: the floor
"""

import argparse
import json
import time
import zlib

import numpy as np
import ray
import ray.cloudpickle
import torch

import marl_inference
from marl_inference import TrafficJunction

# Workers need not find this directory on their path: the env's module travels with the actor class.
ray.cloudpickle.register_pickle_by_value(marl_inference)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000, help="env steps")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--serial", action="store_true", help="the same work in this process, without Ray")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.agents, args.steps = min(args.agents, 4), min(args.steps, 60)
    return args


class Env:
    """The traffic junction, stepped with every agent's action; it keeps the score and the checksum."""

    def __init__(self, num_agents, seed):
        self.env = TrafficJunction(num_agents, grid=14 if num_agents <= 4 else 18, seed=seed)
        self.checksum = 0
        self.episodes = 0
        self.total_reward = 0.0
        self.collisions = 0

    def reset(self):
        return self.env.reset()

    def step(self, *actions):
        self.checksum = zlib.crc32(bytes(actions), self.checksum)
        joint_obs, rewards, done, crashed = self.env.step(actions)
        self.total_reward += float(rewards.sum())
        self.collisions += crashed
        if done:
            self.episodes += 1
            joint_obs = self.env.reset()
        return joint_obs

    def stats(self):
        return {"checksum": f"{self.checksum:08x}", "episodes": self.episodes,
                "total_reward": self.total_reward, "collisions": self.collisions}


def own_view(joint_obs, agent_index, num_agents):
    """Agent ``agent_index``'s 3x3 view of the crossing, out of the joint observation."""
    per_agent = joint_obs.size // num_agents
    return np.array(joint_obs[agent_index * per_agent:(agent_index + 1) * per_agent])


class Policy:
    """One agent's policy: its own view -> hidden -> 2 logits, greedy action."""

    def __init__(self, view_size, hidden, seed):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(view_size, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2))

    def act(self, view):
        with torch.no_grad():
            logits = self.net(torch.from_numpy(np.array(view)))  # received arrays are read-only: copy
        return int(torch.argmax(logits))


EnvActor, PolicyActor, own_view_task = ray.remote(Env), ray.remote(Policy), ray.remote(own_view)


def run(args):
    n = args.agents
    view_size = 9 * (n + 2 + TrafficJunction.ROUTES)
    env = EnvActor.remote(n, args.seed)
    policies = [PolicyActor.remote(view_size, args.hidden, args.seed * 100 + i) for i in range(n)]
    obs_ref = env.reset.remote()
    ray.get([p.act.remote(own_view_task.remote(obs_ref, i, n)) for i, p in enumerate(policies)])  # all up first

    start = time.perf_counter()
    for _ in range(args.steps):
        views = [own_view_task.remote(obs_ref, i, n) for i in range(n)]
        actions = [policy.act.remote(view) for policy, view in zip(policies, views)]
        obs_ref = env.step.remote(*actions)
    stats = ray.get(env.stats.remote())
    elapsed = time.perf_counter() - start
    for actor in policies + [env]:
        ray.kill(actor)
    return dict(stats, agents=n, steps=args.steps, loop_s=elapsed, steps_per_s=args.steps / elapsed)


def run_serial(args):
    """The same loop with plain objects in this process: what the work costs with no runtime at all."""
    n = args.agents
    view_size = 9 * (n + 2 + TrafficJunction.ROUTES)
    env = Env(n, args.seed)
    policies = [Policy(view_size, args.hidden, args.seed * 100 + i) for i in range(n)]
    obs = env.reset()
    start = time.perf_counter()
    for _ in range(args.steps):
        obs = env.step(*[policy.act(own_view(obs, i, n)) for i, policy in enumerate(policies)])
    elapsed = time.perf_counter() - start
    return dict(env.stats(), agents=n, steps=args.steps, loop_s=elapsed, steps_per_s=args.steps / elapsed)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    if args.serial:
        result = run_serial(args)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
        result = run(args)
        ray.shutdown()
    summary = {"example": "marl_chain", "backend": "serial" if args.serial else ray.__name__, "deterministic": True,
               **result}
    print(f"result: {result['agents']} agents, {result['episodes']} episodes, "
          f"{result['collisions']} collisions, total reward {result['total_reward']:.2f}")
    print(f"checksum: {result['checksum']}")
    print(f"throughput: {result['steps_per_s']:.1f} env steps/s")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
