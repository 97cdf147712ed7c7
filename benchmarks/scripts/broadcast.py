"""Broadcast: one array by value to N actors per round, each returns a copy.

Each round the driver calls ``actor.copy.remote(array)`` on every actor and
waits for all the copies:

    copies = ray.get([actor.copy.remote(array) for actor in actors])

Cases: a 10 MB array to 2, 4, 8 and 16 actors, 16 actors with 100 MB, and 16 actors with a
10 MB torch tensor (as a parameter server sends weights).
The figure of merit is the per-round *overhead*: round time minus the time the
driver alone takes to make the same copies (spread over the machine's cores),
i.e. what the runtime adds to move the data. A checksum over the copies'
contents is the same on every Ray-compatible backend.

    python broadcast.py --quick
    python broadcast.py
"""

import argparse
import json
import os
import time

import numpy as np
import ray


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--actor-counts", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--mb", type=float, default=10)
    parser.add_argument("--big-mb", type=float, default=100, help="also 16 actors with this size (0 = skip)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--big-rounds", type=int, default=3)
    parser.add_argument("--torch-mb", type=float, default=10, help="also 16 actors with a torch tensor (0 = skip)")
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.actor_counts, args.mb, args.big_mb, args.rounds, args.big_rounds = [2, 4], 1, 4, 2, 2
        args.torch_mb = 1
    return args


@ray.remote
class Copier:
    def copy(self, array):
        return np.array(array)


def local_copy_ms(array, copies):
    """What the copies alone cost, with perfect parallelism over this machine's cores."""
    start = time.perf_counter()
    for _ in range(copies):
        np.array(array)
    return (time.perf_counter() - start) * 1e3 / min(copies, os.cpu_count() or 1)


def run_case(actors, megabytes, rounds, kind="numpy"):
    array = np.random.default_rng(int(megabytes * 10) + len(actors)).random(int(megabytes * 2**20) // 8)
    if kind == "torch":
        import torch
        array = torch.from_numpy(array)    # the copies come back as numpy arrays (np.array of a tensor)
        ray.get([a.copy.remote(array[:1].clone()) for a in actors])   # not timed: each actor imports torch
    checksum = 0.0
    start = time.perf_counter()
    for _ in range(rounds):
        copies = ray.get([a.copy.remote(array) for a in actors])
        for c in copies:
            assert c.shape == array.shape and c[-1] == array[-1]
            checksum += float(c[::4096].sum())
        del copies
    round_ms = (time.perf_counter() - start) * 1e3 / rounds
    copy_ms = local_copy_ms(array, len(actors))
    return {"actors": len(actors), "mb": megabytes, "kind": kind, "rounds": rounds, "round_ms": round_ms,
            "local_copy_ms": copy_ms, "overhead_ms": max(round_ms - copy_ms, 1e-3), "checksum": checksum}


def main():
    args = parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    actors = [Copier.remote() for _ in range(max(args.actor_counts + [16 if args.big_mb else 0]))]
    ray.get([a.copy.remote(np.zeros(1)) for a in actors])  # every actor is up before any timing
    plan = [(n, args.mb, args.rounds) for n in args.actor_counts]
    if args.big_mb:
        plan.append((16, args.big_mb, args.big_rounds))
    plan = [(n, mb, r, "numpy") for n, mb, r in plan]
    if args.torch_mb:
        plan.append((16, args.torch_mb, args.rounds, "torch"))
    cases = []
    for count, megabytes, rounds, kind in plan:
        case = run_case(actors[:count], megabytes, rounds, kind)
        cases.append(case)
        what = "torch tensor" if kind == "torch" else "array"
        print(f"{count} actors x {megabytes:g} MB {what}: {case['round_ms']:.1f} ms/round, "
              f"overhead {case['overhead_ms']:.1f} ms/round", flush=True)
    ray.shutdown()

    checksum = f"{sum(c['checksum'] for c in cases):.6f}"
    summary = {"example": "broadcast", "backend": ray.__name__, "cases": cases,
               "checksum": checksum, "deterministic": True}
    print(f"result: {len(cases)} broadcast cases")
    print(f"checksum: {checksum}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
