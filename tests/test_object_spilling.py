"""Values past ``object_store_memory`` stay readable, on both backends (Ray spills them to disk; so does rayreact).

Ray's smallest store is 75 MiB; each test starts its own session with 80 MiB and
holds about twice that in live values, made by the driver and by workers.
"""

import numpy as np
import pytest

from conftest import BACKENDS, _import_backend

LIMIT = 80 * 2**20
MB30 = 30 * 2**20 // 8


@pytest.fixture(scope="module", params=BACKENDS)
def small_store(request):
    ray = _import_backend(request.param)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, object_store_memory=LIMIT, include_dashboard=False)
    yield ray
    ray.shutdown()


def test_puts_past_the_limit_stay_readable(small_store):
    ray = small_store
    refs = [ray.put(np.full(MB30, float(i))) for i in range(5)]
    values = [ray.get(r) for r in refs]
    assert [float(v[0]) for v in values] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert all(v.shape == (MB30,) and float(v[-1]) == float(v[0]) for v in values)


def test_task_results_past_the_limit_stay_readable(small_store):
    ray = small_store

    @ray.remote
    def make(i):
        return np.full(MB30, 100.0 + i)

    @ray.remote
    def last(a):
        return float(a[-1])

    refs = [make.remote(i) for i in range(5)]
    assert ray.get([last.remote(r) for r in refs]) == [100.0, 101.0, 102.0, 103.0, 104.0]
    assert [float(ray.get(r)[0]) for r in refs] == [100.0, 101.0, 102.0, 103.0, 104.0]


def test_actor_state_past_the_limit(small_store):
    ray = small_store

    @ray.remote
    class Keeper:
        def __init__(self):
            self.refs = []

        def keep(self, i):
            self.refs.append(ray.put(np.full(MB30, float(i))))
            return len(self.refs)

        def total(self):
            return sum(float(ray.get(r)[0]) for r in self.refs)

    keeper = Keeper.remote()
    assert ray.get([keeper.keep.remote(i) for i in range(5)]) == [1, 2, 3, 4, 5]
    assert ray.get(keeper.total.remote()) == 10.0
