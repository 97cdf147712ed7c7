"""Asynchronous parameter server, in the style of Ray's parameter-server example.

The same parameter server, data workers and synthetic 10-class dataset as
param_server_sync.py, but the server applies each gradient as soon as it
arrives and the worker that sent it immediately continues from the new
weights. The driver tracks in-flight gradients in a dict keyed by their refs
and reacts to whichever finishes first:

    gradients = {worker.compute_gradients.remote(current_weights): worker for worker in workers}
    ready, _ = ray.wait(list(gradients))
    worker = gradients.pop(ready[0])
    current_weights = ps.apply_gradients.remote(ready[0])
    gradients[worker.compute_gradients.remote(current_weights)] = worker

Which worker's gradient lands first depends on timing, so the final weights
vary from run to run (no checksum); the test accuracy is the result.

    python param_server_async.py --quick
    python param_server_async.py --workers 4 --updates 1600
"""

import argparse
import json
import time

import numpy as np
import ray
import torch

FEATURES, CLASSES = 32, 10


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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--updates", type=int, default=1600, help="gradients applied in total")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--samples", type=int, default=20_000, help="training samples, split across workers")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.updates = min(args.updates, 80)
        args.eval_every = 40
        args.workers = min(args.workers, 2)
    return args


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
    gradients = {worker.compute_gradients.remote(current_weights): worker for worker in workers}
    applied_by = [0] * len(workers)
    for update in range(1, args.updates + 1):
        ready, _ = ray.wait(list(gradients))
        worker = gradients.pop(ready[0])
        applied_by[workers.index(worker)] += 1
        current_weights = ps.apply_gradients.remote(ready[0])
        if update <= args.updates - len(workers):  # stop feeding once the last gradients are in flight
            gradients[worker.compute_gradients.remote(current_weights)] = worker
        if update % args.eval_every == 0:
            print(f"update {update}: test accuracy {accuracy(ray.get(current_weights), x_test, y_test):.3f}",
                  flush=True)
    weights = ray.get(current_weights)
    elapsed = time.perf_counter() - start
    assert not gradients, "every gradient sent was applied"
    ray.shutdown()

    final_accuracy = accuracy(weights, x_test, y_test)
    summary = {
        "example": "param_server_async",
        "backend": ray.__name__,
        "updates": args.updates,
        "updates_per_worker": applied_by,
        "test_accuracy": final_accuracy,
        "train_s": elapsed,
        "updates_per_s": args.updates / elapsed,
        "checksum": None,
        "deterministic": False,
    }
    print(f"result: test accuracy {final_accuracy:.3f} after {args.updates} asynchronous updates "
          f"(per worker: {applied_by})")
    print(f"throughput: {summary['updates_per_s']:.1f} updates/s ({elapsed:.2f} s)")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
