"""Actor restarts: a crashed actor with max_restarts comes back with fresh state."""
import os

import ray
from ray.exceptions import RayActorError

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote(max_restarts=2, max_task_retries=0)
class Fragile:
    def __init__(self, label):
        self.label = label
        self.count = 0

    def step(self, crash=False):
        if crash:
            os._exit(1)
        self.count += 1
        return f"{self.label}:{self.count}"


f = Fragile.remote("f")
print([ray.get(f.step.remote()) for _ in range(3)])
try:
    ray.get(f.step.remote(crash=True))
except RayActorError:
    print("crashed call: RayActorError")
# The restarted actor starts over from __init__.
print([ray.get(f.step.remote()) for _ in range(3)])
try:
    ray.get(f.step.remote(crash=True))
except RayActorError:
    print("crashed again: RayActorError")
print(ray.get(f.step.remote()))
try:
    ray.get(f.step.remote(crash=True))
except RayActorError:
    print("third crash: RayActorError")
try:
    ray.get(f.step.remote())
    print("still alive")
except RayActorError:
    print("out of restarts: RayActorError")
ray.shutdown()
