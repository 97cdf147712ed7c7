"""Synchronous parameter server, in the style of Ray's parameter-server example.

A parameter-server actor holds an MLP classifier and an SGD optimizer; data
worker actors each hold a shard of a (synthetic, seeded) 10-class dataset.
Every iteration each worker computes a gradient on its next minibatch at the
current weights, and the gradient refs go *straight* into the server, which
Ray resolves before the call:

    gradients = [worker.compute_gradients.remote(current_weights) for worker in workers]
    current_weights = ps.apply_gradients.remote(*gradients)

The driver never touches a gradient; it only waits for the weights to
evaluate them. The gradients are summed in argument order, so the final
weights are identical on every Ray-compatible backend.

    python param_server_sync.py --quick
    python param_server_sync.py --workers 4 --iterations 400
"""

import argparse
import json
import time
import zlib

import numpy as np
import ray
import torch

FEATURES, CLASSES = 32, 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--samples", type=int, default=20_000, help="training samples, split across workers")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.iterations = min(args.iterations, 20)
        args.eval_every = 10
        args.workers = min(args.workers, 2)
    return args


def make_dataset(samples, seed):
    """Gaussian blobs around 10 random centres, pushed through a fixed random nonlinearity."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLASSES, FEATURES)) * 0.5
    labels = rng.integers(CLASSES, size=samples)
    points = centres[labels] + rng.standard_normal((samples, FEATURES))
    mixing = rng.standard_normal((FEATURES, FEATURES)) / np.sqrt(FEATURES)
    return np.tanh(points @ mixing).astype(np.float32), labels.astype(np.int64)


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))

    def forward(self, x):
        return self.layers(x)

    def get_weights(self):
        return {k: v.detach().clone() for k, v in self.state_dict().items()}

    def set_weights(self, weights):
        self.load_state_dict(weights)

    def get_gradients(self):
        return [p.grad.detach().numpy().copy() for p in self.parameters()]

    def set_gradients(self, gradients):
        for p, g in zip(self.parameters(), gradients):
            p.grad = torch.from_numpy(np.array(g))


@ray.remote
class ParameterServer:
    def __init__(self, lr, seed):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.model = Classifier()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

    def apply_gradients(self, *gradients):
        summed = [np.sum(layer, axis=0) for layer in zip(*gradients)]
        self.optimizer.zero_grad()
        self.model.set_gradients(summed)
        self.optimizer.step()
        return self.model.get_weights()

    def get_weights(self):
        return self.model.get_weights()


@ray.remote
class DataWorker:
    def __init__(self, shard, batch_size, seed):
        torch.set_num_threads(1)
        self.x, self.y = (torch.from_numpy(np.array(a)) for a in shard)
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.model = Classifier()

    def num_samples(self):
        return len(self.y)

    def compute_gradients(self, weights):
        self.model.set_weights(weights)
        index = torch.from_numpy(self.rng.integers(len(self.y), size=self.batch_size))
        self.model.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(self.x[index]), self.y[index])
        loss.backward()
        return self.model.get_gradients()


def accuracy(weights, x, y):
    model = Classifier()
    model.set_weights(weights)
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(dim=1).numpy() == y).mean())


def main():
    args = parse_args()
    torch.set_num_threads(1)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    x, y = make_dataset(args.samples + 5000, args.seed)
    x_train, y_train, x_test, y_test = x[:args.samples], y[:args.samples], x[args.samples:], y[args.samples:]
    ps = ParameterServer.remote(args.lr, args.seed)
    shards = zip(np.array_split(x_train, args.workers), np.array_split(y_train, args.workers))
    workers = [DataWorker.remote(shard, args.batch_size, args.seed * 100 + i) for i, shard in enumerate(shards)]

    shard_sizes = ray.get([worker.num_samples.remote() for worker in workers])  # also: all actors are up
    print(f"data: {sum(shard_sizes)} training samples across {len(workers)} workers")
    current_weights = ps.get_weights.remote()
    start = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        gradients = [worker.compute_gradients.remote(current_weights) for worker in workers]
        current_weights = ps.apply_gradients.remote(*gradients)
        if iteration % args.eval_every == 0:
            print(f"iteration {iteration}: test accuracy {accuracy(ray.get(current_weights), x_test, y_test):.3f}",
                  flush=True)
    weights = ray.get(current_weights)
    elapsed = time.perf_counter() - start
    ray.shutdown()

    final_accuracy = accuracy(weights, x_test, y_test)
    checksum = 0
    for name in sorted(weights):
        checksum = zlib.crc32(weights[name].numpy().tobytes(), checksum)
    summary = {
        "example": "param_server_sync",
        "backend": ray.__name__,
        "iterations": args.iterations,
        "test_accuracy": final_accuracy,
        "train_s": elapsed,
        "iterations_per_s": args.iterations / elapsed,
        "checksum": f"{checksum:08x}",
        "deterministic": True,
    }
    print(f"result: test accuracy {final_accuracy:.3f} after {args.iterations} synchronous iterations")
    print(f"checksum: {summary['checksum']}")
    print(f"throughput: {summary['iterations_per_s']:.1f} iterations/s ({elapsed:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
