"""Micro-benchmarks of the Ray core API, written as an ordinary Ray script.

Measures, in one session: ``ray.init``; the first task after init (cold
start) and init plus that task (the wait before a script's first result); a synchronous task round trip; a synchronous actor-call round trip; a
fan-out of 1,000 tasks gathered with one ``ray.get``; a one-shot fan-out of 2,000 trivial tasks (no
repetition, so no replay), beside the same 2,000 through ``multiprocessing.Pool.apply_async`` (fork, one
process per core, started before ``ray.init``: the peer a user would pick); ``ray.get(ray.put(a))``
of a 128 MB array; and a 128 MB array passed by value as a task argument: unchanged, with
one element changed before each call, and rewritten before each call.
Prints one line per operation (time per operation) and a checksum of every
result, which is the same on every Ray-compatible backend.

    python micro.py --quick
    python micro.py
"""

import argparse
import json
import multiprocessing
import os
import time

import numpy as np
import ray


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument("--calls", type=int, default=2000, help="round trips per latency figure")
    parser.add_argument("--fanout", type=int, default=1000, help="tasks per fan-out")
    parser.add_argument("--fanout-repeats", type=int, default=5)
    parser.add_argument("--one-shot", type=int, default=2000, help="tasks in the one-shot fan-out")
    parser.add_argument("--array-mb", type=int, default=128)
    parser.add_argument("--array-repeats", type=int, default=10)
    parser.add_argument("--num-cpus", type=int, default=None, help="passed to ray.init")
    parser.add_argument("--report", help="also write the summary as JSON to this file")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.fanout, args.fanout_repeats, args.one_shot = 50, 100, 1, 200
        args.array_mb, args.array_repeats = 16, 2
    return args


@ray.remote
def noop(i):
    return i


def triple(i):
    return 3 * i


@ray.remote
def triple_task(i):
    return triple(i)


def _echo(conn):
    while True:
        message = conn.recv()
        if message is None:
            return
        conn.send(message)


def pipe_round_trip(calls):
    """Seconds per round trip of a small message to a forked process and back over a
    ``multiprocessing.Pipe``: the floor of any call that crosses processes and sleeps while it waits."""
    here, there = multiprocessing.Pipe()
    echo = multiprocessing.get_context("fork").Process(target=_echo, args=(there,))
    echo.start()
    for i in range(100):
        here.send(("ping", i))
        here.recv()
    start = time.perf_counter()
    for i in range(calls):
        here.send(("ping", i))
        here.recv()
    seconds = (time.perf_counter() - start) / calls
    here.send(None)
    echo.join()
    return seconds


def pool_fanout(tasks):
    """(seconds, results) of ``tasks`` trivial calls through a warm fork Pool with one process per core."""
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        pool.map(triple, range(2 * os.cpu_count()))     # the processes are up
        start = time.perf_counter()
        pending = [pool.apply_async(triple, (i,)) for i in range(tasks)]
        results = [p.get() for p in pending]
        return time.perf_counter() - start, results


@ray.remote
def ends(array):
    return float(array[0]) + float(array[-1])


@ray.remote
class Counter:
    def __init__(self):
        self.calls = 0

    def ping(self, i):
        self.calls += 1
        return i


def timed(fn, repeats):
    """(seconds per call, results): fn(i) for i in range(repeats)."""
    results = []
    start = time.perf_counter()
    for i in range(repeats):
        results.append(fn(i))
    return (time.perf_counter() - start) / repeats, results


def main():
    args = parse_args()
    ops, checksum = [], 0

    def record(name, seconds, unit="us"):
        value = seconds * (1e6 if unit == "us" else 1e3)
        ops.append({"name": name, "value": value, "unit": unit})
        print(f"{name}: {value:.1f} {unit}", flush=True)

    # Before init: a fork after it would copy the runtime's threads.
    pool_seconds, pool_results = pool_fanout(args.one_shot)
    pipe_seconds = pipe_round_trip(args.calls)

    start = time.perf_counter()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    initialized = time.perf_counter()
    record("init", initialized - start, "ms")

    checksum += ray.get(noop.remote(1))
    first = time.perf_counter()
    record("first task after init", first - initialized, "ms")
    record("init + first task", first - start, "ms")   # what a script waits for before its first result

    per_call, results = timed(lambda i: ray.get(noop.remote(i)), args.calls)
    checksum += sum(results)
    record("task round trip", per_call)

    counter = Counter.remote()
    ray.get(counter.ping.remote(0))  # the actor is up
    per_call, results = timed(lambda i: ray.get(counter.ping.remote(i)), args.calls)
    checksum += sum(results)
    record("actor call round trip", per_call)
    ops[-1]["peer"] = {"name": "multiprocessing.Pipe round trip", "value": pipe_seconds * 1e6}
    record("the same round trip over a multiprocessing.Pipe (no runtime: the floor of a blocking cross-process "
           "call)", pipe_seconds)

    ray.get([noop.remote(i) for i in range(args.fanout)])  # warm the task workers
    per_fanout, results = timed(lambda _: sum(ray.get([noop.remote(i) for i in range(args.fanout)])),
                                args.fanout_repeats)
    checksum += sum(results)
    record(f"{args.fanout}-task fan-out", per_fanout, "ms")

    start = time.perf_counter()
    results = ray.get([triple_task.remote(i) for i in range(args.one_shot)])
    one_shot = time.perf_counter() - start
    assert results == pool_results
    checksum += sum(results)
    record(f"{args.one_shot}-task one-shot fan-out", one_shot, "ms")
    ops[-1]["peer"] = {"name": "multiprocessing.Pool.apply_async", "value": pool_seconds * 1e3}
    record(f"{args.one_shot} tasks through multiprocessing.Pool.apply_async (fork, {os.cpu_count()} processes)",
           pool_seconds, "ms")

    array = np.arange(args.array_mb * 2**20 // 8, dtype=np.float64)
    per_op, results = timed(lambda _: ray.get(ray.put(array)), args.array_repeats)
    assert all(r.shape == array.shape and r[-1] == array[-1] for r in results)
    checksum += int(sum(r[-1] for r in results))
    del results
    record(f"put+get {args.array_mb} MB", per_op, "ms")

    ray.get(ends.remote(array[:8]))  # warm
    per_op, results = timed(lambda _: ray.get(ends.remote(array)), args.array_repeats)
    checksum += int(sum(results))
    record(f"array as task argument {args.array_mb} MB", per_op, "ms")

    def changed_then_passed(i):
        array[i] = -1.0             # one element changed: a new value, most of it as before
        return ray.get(ends.remote(array))

    per_op, results = timed(changed_then_passed, args.array_repeats)
    checksum += int(sum(results))
    record(f"array with one element changed per call, as task argument {args.array_mb} MB", per_op, "ms")

    elapsed, results = 0.0, []
    for i in range(args.array_repeats):
        array[:] = i                # every byte new: the whole array must travel (the fill is not timed)
        start = time.perf_counter()
        results.append(ray.get(ends.remote(array)))
        elapsed += time.perf_counter() - start
    checksum += int(sum(results))
    record(f"array rewritten per call, as task argument {args.array_mb} MB", elapsed / args.array_repeats, "ms")

    ray.shutdown()
    summary = {"example": "micro", "backend": ray.__name__, "ops": ops,
               "checksum": f"{checksum:d}", "deterministic": True}
    print(f"result: {len(ops)} operations timed")
    print(f"checksum: {summary['checksum']}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
