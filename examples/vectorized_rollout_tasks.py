"""Evolution strategies on CartPole with remote *functions* (tasks), no actors.

Each iteration the driver samples a population of noise seeds and launches one
stateless task per antithetic pair; each task rebuilds the perturbation from
its seed, evaluates both signs on a small vectorized env
(``gymnasium.make_vec(..., vectorization_mode="sync")``, several episodes at
once) and returns the two mean returns:

    returns = ray.get([evaluate.remote(theta, seed, sigma, ...) for seed in seeds])

The driver then moves the linear policy along the return-weighted noise. The
parameters are put in the object store once per iteration and shared by every
task. Everything is seeded and the update sums in population order, so the
final parameters (and their checksum) are identical on every Ray-compatible
backend.

    python vectorized_rollout_tasks.py --quick
    python vectorized_rollout_tasks.py --population 16 --iterations 30
"""

import argparse
import json
import time
import zlib

import gymnasium as gym
import numpy as np
import ray

OBS, ACTIONS = 4, 2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--population", type=int, default=16, help="antithetic pairs (tasks) per iteration")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--envs-per-task", type=int, default=4, help="width of each task's vectorized env")
    parser.add_argument("--max-steps", type=int, default=200, help="per episode")
    parser.add_argument("--sigma", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.population = min(args.population, 4)
        args.iterations = min(args.iterations, 3)
        args.max_steps = min(args.max_steps, 50)
    return args


def policy_actions(theta, obs):
    """Linear policy: argmax over obs @ W + b, for a batch of observations."""
    weights = theta[:OBS * ACTIONS].reshape(OBS, ACTIONS)
    bias = theta[OBS * ACTIONS:]
    return np.argmax(obs @ weights + bias, axis=1)


def vector_return(theta, num_envs, max_steps, env_seed):
    """Mean undiscounted return over `num_envs` episodes run side by side."""
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    obs, _ = envs.reset(seed=env_seed)
    totals = np.zeros(num_envs)
    alive = np.ones(num_envs, bool)
    for _ in range(max_steps):
        obs, rewards, terminated, truncated, _ = envs.step(policy_actions(theta, obs))
        totals += rewards * alive
        alive &= ~(terminated | truncated)
        if not alive.any():
            break
    envs.close()
    return float(totals.mean())


@ray.remote
def evaluate(theta, noise_seed, sigma, num_envs, max_steps, env_seed):
    noise = np.random.default_rng(noise_seed).standard_normal(theta.shape)
    plus = vector_return(theta + sigma * noise, num_envs, max_steps, env_seed)
    minus = vector_return(theta - sigma * noise, num_envs, max_steps, env_seed)
    return plus, minus


def main():
    args = parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    rng = np.random.default_rng(args.seed)
    theta = np.zeros(OBS * ACTIONS + ACTIONS)
    rollouts = 0
    start = time.perf_counter()
    for iteration in range(args.iterations):
        noise_seeds = rng.integers(2**31, size=args.population)
        env_seed = int(rng.integers(2**31))
        theta_ref = ray.put(theta)
        results = ray.get([evaluate.remote(theta_ref, int(s), args.sigma, args.envs_per_task, args.max_steps, env_seed)
                           for s in noise_seeds])
        rollouts += 2 * args.population * args.envs_per_task
        returns = np.array(results)  # (population, 2)
        # rank-normalized antithetic estimate, summed in population order
        ranks = returns.ravel().argsort().argsort().reshape(returns.shape) / (returns.size - 1) - 0.5
        step = np.zeros_like(theta)
        for seed, (plus_rank, minus_rank) in zip(noise_seeds, ranks):
            step += (plus_rank - minus_rank) * np.random.default_rng(int(seed)).standard_normal(theta.shape)
        theta = theta + args.lr / (args.population * args.sigma) * step
        print(f"iteration {iteration}: mean return {returns.mean():.1f}, best {returns.max():.1f}", flush=True)
    elapsed = time.perf_counter() - start
    final = ray.get(evaluate.remote(theta, 0, 0.0, args.envs_per_task, args.max_steps, args.seed + 999))[0]
    ray.shutdown()

    summary = {
        "example": "vectorized_rollout_tasks",
        "backend": ray.__name__,
        "iterations": args.iterations,
        "tasks": args.iterations * args.population,
        "final_return": final,
        "train_s": elapsed,
        "episodes_per_s": rollouts / elapsed,
        "checksum": f"{zlib.crc32(theta.tobytes()):08x}",
        "deterministic": True,
    }
    print(f"result: final policy return {final:.1f} (max {args.max_steps}) after {summary['tasks']} tasks")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {summary['episodes_per_s']:.1f} episodes/s ({elapsed:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
