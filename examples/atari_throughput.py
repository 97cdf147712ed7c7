"""Atari frame throughput: 15 ALE env actors, every raw frame back to the driver.

The second workload of the reactor-model RL paper: the same shape as
gym_throughput.py, but each actor runs an Atari game (cycling Pong, MsPacman,
SpaceInvaders; ale-py ships the ROMs) and every step returns the full
210x160x3 uint8 frame to the driver, so the runtime has to move ~100 KB per
actor per step:

    ray.get([actor.step.remote(action) for actor, action in ...])

Prints frames per second and a checksum of every frame received (all
randomness, including ALE's sticky actions, is seeded).

    python atari_throughput.py --quick
    python atari_throughput.py --actors 15 --rounds 300
    python atari_throughput.py --serial --actors 3   # single-process env speed, no Ray
    python atari_throughput.py --spread 2            # the same games in 2 plain processes, no Ray
"""

import argparse
import json
import time
import zlib

import ale_py
import gymnasium as gym
import numpy as np
import ray

gym.register_envs(ale_py)

GAMES = ["ALE/Pong-v5", "ALE/MsPacman-v5", "ALE/SpaceInvaders-v5"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--actors", type=int, default=15)
    parser.add_argument("--game", action="append", help=f"game to step (repeatable; default: {', '.join(GAMES)})")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--serial", action="store_true", help="step the same envs in this process, without Ray")
    parser.add_argument("--spread", type=int, metavar="N", help="step the same envs in N plain processes, "
                        "without Ray: the floor of this lock-step round spread over the cores (examples/_lockstep_floor.py)")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.rounds = min(args.rounds, 20)
        args.actors = min(args.actors, 6)
    return args


class AtariRunner:
    """One ALE game; resets itself when an episode ends and returns raw frames."""

    def __init__(self, game, seed):
        # each actor process registers the ALE envs itself: registration is per process
        import ale_py
        gym.register_envs(ale_py)
        self.env = gym.make(game)
        self.seed = seed

    def reset(self):
        frame, _ = self.env.reset(seed=self.seed)
        return frame

    def step(self, action):
        frame, reward, terminated, truncated, _ = self.env.step(action)
        done = terminated or truncated
        if done:
            frame, _ = self.env.reset()
        return frame, reward, done


def main():
    args = parse_args()
    cycle = args.game or GAMES
    games = [cycle[i % len(cycle)] for i in range(args.actors)]
    spaces = []
    for i, game in enumerate(games):
        space = gym.make(game).action_space
        space.seed(args.seed + 1000 + i)
        spaces.append(space)
    start = time.perf_counter()

    if args.serial:
        runners = [AtariRunner(game, args.seed + i) for i, game in enumerate(games)]
        first_frames = [r.reset() for r in runners]

        def one_round(actions):
            return [r.step(a) for r, a in zip(runners, actions)]
    elif args.spread:
        from _lockstep_floor import LockstepFloor
        floor = LockstepFloor(lambda i: AtariRunner(games[i], args.seed + i), args.actors, args.spread,
                              obs_shape=(210, 160, 3), obs_dtype=np.uint8)
        first_frames, one_round = floor.first_obs, floor.one_round
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
        AtariActor = ray.remote(AtariRunner)
        actors = [AtariActor.remote(game, args.seed + i) for i, game in enumerate(games)]
        first_frames = ray.get([a.reset.remote() for a in actors])

        def one_round(actions):
            return ray.get([a.step.remote(x) for a, x in zip(actors, actions)])

    setup_s = time.perf_counter() - start
    checksum = 0
    for frame in first_frames:
        checksum = zlib.crc32(frame, checksum)
    total_reward = 0.0
    loop_start = time.perf_counter()
    for _ in range(args.rounds):
        results = one_round([space.sample() for space in spaces])
        for frame, reward, _ in results:
            assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8
            checksum = zlib.crc32(frame, checksum)
            total_reward += reward
    loop_s = time.perf_counter() - loop_start
    if args.spread:
        floor.close()
    elif not args.serial:
        ray.shutdown()

    frames = args.actors * args.rounds
    summary = {
        "example": "atari_throughput",
        "backend": "serial" if args.serial else f"spread over {args.spread}" if args.spread else ray.__name__,
        "actors": args.actors,
        "rounds": args.rounds,
        "total_reward": total_reward,
        "setup_s": setup_s,
        "loop_s": loop_s,
        "frames_per_s": frames / loop_s,
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    print(f"result: {frames} frames of 210x160x3 from {args.actors} games, total reward {total_reward:g}")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {summary['frames_per_s']:.1f} frames/s (setup {setup_s:.2f} s, loop {loop_s:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
