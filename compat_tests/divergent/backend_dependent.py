"""Deliberately divergent: computes differently when ``ray`` is not the real Ray.

``rayreact compare`` must report this script as DIVERGED (tests/test_compat.py checks
that it does): the actor receives different arguments under rayreact.
"""
import ray

ray.init(num_cpus=2, include_dashboard=False)

# Under `rayreact run` the module imported as `ray` is rayreact.
STEP = 1 if ray.__name__ == "ray" else 2


@ray.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


c = Counter.remote()
print([ray.get(c.add.remote(STEP)) for _ in range(3)])
ray.shutdown()
