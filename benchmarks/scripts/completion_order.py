"""A loop in completion order with little work per call: what the runtime costs an asynchronous parameter server.

Four workers each compute a "gradient" (a 1,000-float array) from the weights they are given; the driver
waits for whichever is ready, hands it to the parameter server and gives that worker the new weights:

    ready, _ = ray.wait(list(in_flight))
    worker = in_flight.pop(ready[0])
    in_flight[worker.compute.remote(ps.apply.remote(ready[0]))] = worker

The work per call is a few microseconds, so the figure (updates/s) is the runtime's per-call cost.  Run it
under each backend (the same file):

    python benchmarks/scripts/completion_order.py                                      # real Ray
    python -m rayreact run --explain benchmarks/scripts/completion_order.py            # rayreact, replayed
    RAYREACT_REACTOR=0 python -m rayreact run benchmarks/scripts/completion_order.py   # reactor off
"""

import argparse
import time

import numpy as np
import ray


@ray.remote
class ParameterServer:
    def __init__(self, size):
        self.weights = np.zeros(size)

    def apply(self, gradient):
        self.weights -= 0.01 * gradient
        return self.weights


@ray.remote
class Worker:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def compute(self, weights):
        return weights * 0.5 + self.rng.standard_normal(weights.shape)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False)
    ps = ParameterServer.remote(args.size)
    workers = [Worker.remote(k) for k in range(args.workers)]
    weights = ps.apply.remote(np.zeros(args.size))
    in_flight = {worker.compute.remote(weights): worker for worker in workers}

    def loop(updates):
        for _ in range(updates):
            ready, _ = ray.wait(list(in_flight))
            worker = in_flight.pop(ready[0])
            in_flight[worker.compute.remote(ps.apply.remote(ready[0]))] = worker

    loop(200)                                   # warm-up (rayreact records and switches to replay here)
    start = time.perf_counter()
    loop(args.updates)
    elapsed = time.perf_counter() - start
    ray.wait(list(in_flight), num_returns=len(in_flight))
    ray.shutdown()
    print(f"completion order: {args.updates / elapsed:.0f} updates/s ({args.workers} workers, {ray.__name__})")


if __name__ == "__main__":
    main()
