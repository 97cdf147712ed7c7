"""Environment-stepping throughput with one gymnasium env per Ray actor.

The first workload of the reactor-model RL paper (Kwok, Lohstroh, Lee 2023):
15 env actors, each holding one env (cycling CartPole-v1 / Blackjack-v1 /
Pendulum-v1). Every round the driver draws a seeded random action per env,
sends it by value, and waits on one barrier:

    ray.get([actor.step.remote(action) for actor, action in ...])

Episodes reset inside the actor when they end. The script prints the
observations per second and a checksum of every observation it received, which
is the same on every Ray-compatible backend because all randomness is seeded.

    python gym_throughput.py --quick
    python gym_throughput.py --actors 15 --rounds 1000
    python gym_throughput.py --serial      # the same envs in-process, no Ray
    python gym_throughput.py --spread 2    # the same envs in 2 plain processes, no Ray
"""

import argparse
import json
import time
import zlib

import gymnasium as gym
import numpy as np
import ray

ENV_NAMES = ["CartPole-v1", "Blackjack-v1", "Pendulum-v1"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--actors", type=int, default=15)
    parser.add_argument("--env", action="append", help=f"env id to step (repeatable; default: {', '.join(ENV_NAMES)})")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--serial", action="store_true", help="step the same envs in this process, without Ray")
    parser.add_argument("--spread", type=int, metavar="N", help="step the same envs in N plain processes, "
                        "without Ray: the floor of this lock-step round spread over the cores (examples/_lockstep_floor.py)")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.rounds = min(args.rounds, 50)
        args.actors = min(args.actors, 6)
    return args


class EnvRunner:
    """One environment; resets itself when an episode ends."""

    def __init__(self, env_name, seed):
        self.env = gym.make(env_name)
        self.seed = seed

    def reset(self):
        obs, _ = self.env.reset(seed=self.seed)
        return obs

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        done = terminated or truncated
        if done:
            obs, _ = self.env.reset()
        return obs, reward, done


def seeded_action_spaces(env_names, seed):
    spaces = []
    for i, name in enumerate(env_names):
        space = gym.make(name).action_space
        space.seed(seed + 1000 + i)
        spaces.append(space)
    return spaces


def fold(checksum, obs, reward):
    # float64 so Blackjack's int tuples and CartPole's float32 arrays hash alike on any backend
    checksum = zlib.crc32(np.asarray(obs, dtype=np.float64).tobytes(), checksum)
    return zlib.crc32(np.float64(reward).tobytes(), checksum)


def main():
    args = parse_args()
    cycle = args.env or ENV_NAMES
    env_names = [cycle[i % len(cycle)] for i in range(args.actors)]
    spaces = seeded_action_spaces(env_names, args.seed)
    start = time.perf_counter()

    if args.serial:
        runners = [EnvRunner(name, args.seed + i) for i, name in enumerate(env_names)]
        first_obs = [r.reset() for r in runners]

        def one_round(actions):
            return [r.step(a) for r, a in zip(runners, actions)]
    elif args.spread:
        from _lockstep_floor import LockstepFloor
        floor = LockstepFloor(lambda i: EnvRunner(env_names[i], args.seed + i), args.actors, args.spread)
        first_obs, one_round = floor.first_obs, floor.one_round
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
        EnvActor = ray.remote(EnvRunner)
        actors = [EnvActor.remote(name, args.seed + i) for i, name in enumerate(env_names)]
        first_obs = ray.get([a.reset.remote() for a in actors])

        def one_round(actions):
            return ray.get([a.step.remote(x) for a, x in zip(actors, actions)])

    setup_s = time.perf_counter() - start
    checksum = 0
    for obs in first_obs:
        checksum = fold(checksum, obs, 0.0)
    episodes = 0
    loop_start = time.perf_counter()
    for _ in range(args.rounds):
        results = one_round([space.sample() for space in spaces])
        for obs, reward, done in results:
            checksum = fold(checksum, obs, reward)
            episodes += done
    loop_s = time.perf_counter() - loop_start
    if args.spread:
        floor.close()
    elif not args.serial:
        ray.shutdown()

    observations = args.actors * args.rounds
    summary = {
        "example": "gym_throughput",
        "backend": "serial" if args.serial else f"spread over {args.spread}" if args.spread else ray.__name__,
        "actors": args.actors,
        "rounds": args.rounds,
        "episodes_finished": episodes,
        "setup_s": setup_s,
        "loop_s": loop_s,
        "observations_per_s": observations / loop_s,
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    print(f"result: {observations} observations from {args.actors} envs, {episodes} episodes finished")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {summary['observations_per_s']:.1f} observations/s (setup {setup_s:.2f} s, loop {loop_s:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
