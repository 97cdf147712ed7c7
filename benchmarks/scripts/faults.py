"""Faults: how long a caller waits for the error after a worker is killed mid-call.

Each case starts a call that would run for a minute, kills the worker process running it with
SIGKILL, and times kill → the error ``get`` raises:

- ``actor``: a fresh actor (dynamic calls): ``RayActorError``;
- ``actor_after_loop``: an actor after 200 iterations of a fixed loop (on rayreact the loop is
  replaying when the kill comes): ``RayActorError``;
- ``task``: a task with ``max_retries=0``: ``WorkerCrashedError``.

    python faults.py --quick
    python faults.py
"""

import argparse
import json
import os
import signal
import time

import ray


class Victim:
    def pid(self):
        return os.getpid()

    def step(self, x):
        return x + 1

    def hang(self):
        time.sleep(60)


def hang_task(path):
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)


def time_to_error(ref, pid, errors):
    start = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    try:
        ray.get(ref, timeout=60)
    except errors:
        return time.perf_counter() - start
    raise AssertionError("the call did not fail")


def actor_case(loop):
    victim = ray.remote(Victim).remote()
    pid = ray.get(victim.pid.remote())
    for i in range(loop):
        assert ray.get(victim.step.remote(i)) == i + 1
    ref = victim.hang.remote()
    return time_to_error(ref, pid, ray.exceptions.RayActorError)


def task_case(tmp):
    path = os.path.join(tmp, f"hang-{time.time_ns()}")
    ref = ray.remote(max_retries=0)(hang_task).remote(path)
    deadline = time.time() + 60
    while not os.path.exists(path) or not open(path).read():
        if time.time() > deadline:
            raise AssertionError("the task never started")
        time.sleep(0.005)
    return time_to_error(ref, int(open(path).read()), ray.exceptions.WorkerCrashedError)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one repetition")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    repeats = 1 if args.quick else 5
    ray.init(num_cpus=2, include_dashboard=False)
    import tempfile
    tmp = tempfile.mkdtemp()
    cases = {"actor": lambda: actor_case(0), "actor_after_loop": lambda: actor_case(200),
             "task": lambda: task_case(tmp)}
    figures = {}
    for name, run in cases.items():
        times = sorted(run() for _ in range(repeats))
        figures[name] = {"median_ms": 1000 * times[len(times) // 2], "max_ms": 1000 * times[-1]}
        print(f"{name:18s} kill → error: median {figures[name]['median_ms']:.1f} ms, "
              f"max {figures[name]['max_ms']:.1f} ms")
    ray.shutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
