"""``util.multiprocessing.Pool`` starts a session sized to the pool when none is running.

Lives apart from test_util_pool.py: these tests own ``init``/``shutdown`` (two
sessions of real Ray cannot coexist).
"""

from conftest import submodule


def square(x):
    return x * x


def test_pool_starts_a_session_with_one_cpu_per_process(backend_module):
    mp = submodule(backend_module, "util.multiprocessing")
    assert not backend_module.is_initialized()
    with mp.Pool(processes=1) as pool:
        assert backend_module.is_initialized()
        assert backend_module.cluster_resources()["CPU"] == 1.0
        assert pool.map(square, range(4)) == [0, 1, 4, 9]
