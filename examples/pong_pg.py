"""Policy gradient on Atari Pong with rollout actors, in the style of Ray's docs.

A numpy two-layer policy (6400 -> 200 -> 1, the probability of moving up), as
in Karpathy's "Pong from Pixels", trained with REINFORCE and RMSProp:

* each iteration the driver puts the model in the object store once
  (``model_ref = ray.put(model)``) and every rollout actor plays an episode
  with it and returns the gradient of its episode;
* results are collected as they finish with ``ray.wait``; the gradients are
  summed in actor order, so the run is reproducible under a fixed seed;
* the running reward (an exponential average of episode scores, -21 = lost
  every point) rises as the policy learns; that takes on the order of a
  thousand episodes, so ``--quick`` only exercises the machinery (it also caps
  episode length).

    python pong_pg.py --quick
    python pong_pg.py --actors 4 --iterations 500
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

UP, DOWN = 2, 3  # ALE Pong action ids
INPUT = 80 * 80


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--actors", type=int, default=4, help="rollout actors = episodes per iteration")
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--max-episode-steps", type=int, default=0, help="0 = play episodes to the end")
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--decay", type=float, default=0.99, help="RMSProp decay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.actors = min(args.actors, 2)
        args.iterations = min(args.iterations, 2)
        args.max_episode_steps = args.max_episode_steps or 150
    return args


def preprocess(frame):
    """210x160x3 frame -> 6400 floats: crop the court, downsample, paddles and ball = 1."""
    court = frame[35:195:2, ::2, 0]
    return ((court != 144) & (court != 109) & (court != 0)).astype(np.float32).ravel()


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def discounted(rewards, gamma):
    """Discounted returns, restarting at every point scored (Pong's rewards are sparse)."""
    returns = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if rewards[t] != 0:
            running = 0.0
        running = running * gamma + rewards[t]
        returns[t] = running
    return returns


def policy_forward(model, x):
    """(probability of moving up, hidden activations) for one difference frame."""
    h = np.maximum(model["W1"] @ x, 0.0)
    return sigmoid(float(model["W2"] @ h)), h


def policy_backward(model, xs, hs, dlogits):
    """Gradient of sum_t dlogits[t] * logit_t with respect to the weights (backprop through the ReLU layer)."""
    grad_w2 = hs.T @ dlogits
    dh = np.outer(dlogits, model["W2"])
    dh[hs <= 0] = 0.0
    return {"W1": dh.T @ xs, "W2": grad_w2}


def new_model(hidden, seed):
    rng = np.random.default_rng(seed)
    return {
        "W1": (rng.standard_normal((hidden, INPUT)) / np.sqrt(INPUT)).astype(np.float32),
        "W2": (rng.standard_normal(hidden) / np.sqrt(hidden)).astype(np.float32),
    }


@ray.remote
class PongRollout:
    def __init__(self, seed, max_episode_steps, gamma):
        import ale_py
        gym.register_envs(ale_py)
        self.env = gym.make("ALE/Pong-v5")
        self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.max_episode_steps = max_episode_steps
        self.gamma = gamma

    def compute_gradient(self, model):
        """Play one episode with `model`; return (gradient of log-likelihood * advantage, score)."""
        frame, _ = self.env.reset()
        previous = None
        inputs, hiddens, dlogits, rewards = [], [], [], []
        steps, done = 0, False
        while not done:
            current = preprocess(frame)
            x = current - previous if previous is not None else np.zeros(INPUT, np.float32)
            previous = current
            p_up, h = policy_forward(model, x)
            go_up = self.rng.random() < p_up
            inputs.append(x)
            hiddens.append(h)
            dlogits.append(float(go_up) - p_up)  # d log pi(action) / d logit
            frame, reward, terminated, truncated, _ = self.env.step(UP if go_up else DOWN)
            rewards.append(reward)
            steps += 1
            done = terminated or truncated or (self.max_episode_steps and steps >= self.max_episode_steps)
        advantages = discounted(np.array(rewards, np.float32), self.gamma)
        advantages -= advantages.mean()
        advantages /= advantages.std() + 1e-8
        gradient = policy_backward(model, np.stack(inputs), np.stack(hiddens),
                                   np.array(dlogits, np.float32) * advantages)
        return gradient, float(np.sum(rewards)), steps


def main():
    args = parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    model = new_model(args.hidden, args.seed)
    rmsprop_cache = {k: np.zeros_like(v) for k, v in model.items()}
    actors = [PongRollout.remote(args.seed * 100 + i, args.max_episode_steps, args.gamma) for i in range(args.actors)]

    running_reward = None
    history = []
    frames = 0
    start = time.perf_counter()
    for iteration in range(args.iterations):
        model_ref = ray.put(model)
        pending = {actor.compute_gradient.remote(model_ref): i for i, actor in enumerate(actors)}
        results = [None] * len(actors)
        while pending:
            [ready], _ = ray.wait(list(pending))
            results[pending.pop(ready)] = ray.get(ready)
        gradient = {k: np.zeros_like(v) for k, v in model.items()}
        for grad, score, steps in results:  # actor order, not arrival order: reproducible sums
            for k in model:
                gradient[k] += grad[k]
            running_reward = score if running_reward is None else 0.99 * running_reward + 0.01 * score
            frames += steps
        for k in model:  # gradient ascent on the expected return, RMSProp-scaled
            rmsprop_cache[k] = args.decay * rmsprop_cache[k] + (1 - args.decay) * gradient[k] ** 2
            model[k] = model[k] + args.lr * gradient[k] / (np.sqrt(rmsprop_cache[k]) + 1e-5)
        history.append(running_reward)
        if iteration % 10 == 0 or iteration == args.iterations - 1:
            print(f"iteration {iteration}: running reward {running_reward:.2f}, "
                  f"{frames / (time.perf_counter() - start):.0f} frames/s", flush=True)
    elapsed = time.perf_counter() - start
    ray.shutdown()

    checksum = 0
    for k in sorted(model):
        checksum = zlib.crc32(model[k].tobytes(), checksum)
    summary = {
        "example": "pong_pg",
        "backend": ray.__name__,
        "iterations": args.iterations,
        "episodes": args.iterations * args.actors,
        "running_reward": running_reward,
        "running_reward_history": history,
        "train_s": elapsed,
        "frames_per_s": frames / elapsed,
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    print(f"result: running reward {running_reward:.2f} after {summary['episodes']} episodes")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {summary['frames_per_s']:.0f} frames/s ({elapsed:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
