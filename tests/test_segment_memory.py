"""rayreact's shared-memory bookkeeping: sharing happens, recycling stays bounded, nothing outlives the session.

rayreact-only (real Ray has no segment files); each test owns its session.  The
semantic side (snapshots stay snapshots) is tests/test_object_sharing.py, on both backends.
"""

import glob
import os

import numpy as np

from rayreact.core import segments

from conftest import wait_until

MB = 2**20




def _files(rt, kind=""):
    return [p for p in glob.glob(os.path.join(rt.shm_dir, f"rr-{rt.session}-{kind}*")) if os.path.isfile(p)]


def _object_path(rt, ref):
    return rt.objects[ref._id].desc[1]


def test_identical_puts_share_one_file_and_a_change_gets_its_own(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1)
    rt = ray.core.context.dynamic_runtime()
    arr = np.arange(2 * MB, dtype=np.float64)
    first, second = ray.put(arr), ray.put(arr)
    assert os.stat(_object_path(rt, first)).st_ino == os.stat(_object_path(rt, second)).st_ino
    arr[-1] = -1.0
    third = ray.put(arr)
    assert os.stat(_object_path(rt, third)).st_ino != os.stat(_object_path(rt, first)).st_ino
    assert [float(ray.get(r)[-1]) for r in (first, second, third)] == [2 * MB - 1.0, 2 * MB - 1.0, -1.0]


def test_put_and_drop_loops_stay_within_the_pool(fresh_rayreact):
    ray = fresh_rayreact
    store = 256 * MB
    ray.init(num_cpus=1, object_store_memory=store)
    rt = ray.core.context.dynamic_runtime()
    pool = segments.segment_pool.limit
    assert 0 < pool <= store // 4

    @ray.remote
    def double(a):
        return a * 2

    rng = np.random.default_rng(0)
    for i in range(120):
        x = rng.random(int(rng.integers(25_000, 400_000)))   # 0.2 to 3 MB
        assert float(ray.get(ray.put(x))[0]) == float(x[0])
        assert float(ray.get(double.remote(x))[-1]) == 2 * float(x[-1])
        same = np.full(MB // 8 * 3, float(i))
        assert float(ray.get(double.remote(same))[0]) == 2.0 * i
    held = sum(os.path.getsize(p) for p in _files(rt))
    # Live values: none.  What remains is the pool, remembered snapshots and small session files.
    assert held <= pool + pool // 2 + 8 * MB, (held, pool)
    assert len(_files(rt, "pend")) <= segments.MAX_PENDING


def test_nothing_is_left_after_shutdown(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1)
    rt = ray.core.context.dynamic_runtime()
    kept = [ray.put(np.full(MB, float(i))) for i in range(3)]
    values = [ray.get(r) for r in kept]
    del kept
    ray.put(np.zeros(MB))
    assert _files(rt)
    prefix = os.path.join(rt.shm_dir, f"rr-{rt.session}-")
    ray.shutdown()
    assert not glob.glob(prefix + "*")
    assert [float(v[0]) for v in values] == [0.0, 1.0, 2.0]   # values outlive the session's files


def test_fresh_worker_results_change_hands_without_a_copy(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1)

    @ray.remote
    class Maker:
        def fresh(self, value):
            return np.full(2**20, value)         # 8 MB born in a slot: handed over

        def kept(self, value):
            self.buffer = np.full(2**20, value)  # still held after the call: copied
            return self.buffer

        def counts(self):
            from rayreact.core.handoff import handoff
            return handoff.handed, handoff.copied

        def pid(self):
            return os.getpid()

    maker = Maker.remote()
    values = [ray.get(maker.fresh.remote(float(i))) for i in range(5)]
    handed, copied = ray.get(maker.counts.remote())
    assert handed >= 3 and copied == 0            # the first call or two find no slot yet
    kept = [ray.get(maker.kept.remote(float(i))) for i in range(4)]
    assert ray.get(maker.counts.remote())[1] >= 2
    assert [float(v[-1]) for v in values + kept] == [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 2.0, 3.0]
    # The worker keeps a free slot for its next result; when it dies, the driver removes the file.
    rt = ray.core.context.dynamic_runtime()
    pid = ray.get(maker.pid.remote())
    assert _files(rt, f"slot-{pid}-")
    ray.kill(maker)
    wait_until(lambda: not _files(rt, f"slot-{pid}-"))


def test_a_value_held_past_its_refs_end_joins_the_pool_when_the_script_lets_go(fresh_rayreact, monkeypatch):
    # Its file waits under a pending name while the script still views it; the next release after the
    # script let go pools it (without waiting for the periodic try of every pending file).
    ray = fresh_rayreact
    ray.init(num_cpus=1)
    rt = ray.core.context.dynamic_runtime()

    @ray.remote
    def make(value):
        return np.full(MB // 8, value)           # 1 MB, written by a worker: the driver maps it

    ray.get(ray.put(np.zeros(MB // 8)))        # (a first release: the periodic try is behind us)
    monkeypatch.setattr(segments, "SETTLE_SECONDS", 3600.0)
    ref = make.remote(7.0)
    held = ray.get(ref)
    ino = os.stat(_object_path(rt, ref)).st_ino
    del ref
    wait_until(lambda: any(p.endswith(f"-{ino}") for p in _files(rt, "pend")))
    assert float(held[0]) == 7.0
    del held
    ray.get(ray.put(np.ones(MB // 2)))         # another release (4 MB: no taker for the 1 MB file)
    wait_until(lambda: any(p.endswith(f"-{ino}") for p in _files(rt, "pool")), timeout=5.0)
    assert not any(p.endswith(f"-{ino}") for p in _files(rt, "pend"))
