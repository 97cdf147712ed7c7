"""rayreact's object-store limits: past ``object_store_memory`` values spill to disk; a small /dev/shm falls back.

Where the bytes live is rayreact's own business (these tests look at its files); that
values past the limit stay readable on both backends is in test_object_spilling.py.
Each test owns its session.
"""

import glob
import os
import re

import numpy as np
import pytest

from rayreact.core import session_dir

from conftest import wait_until




def test_values_past_object_store_memory_spill_to_disk(fresh_rayreact):
    ray = fresh_rayreact
    limit = 100 * 2**20
    ray.init(num_cpus=2, object_store_memory=limit)
    rt = ray.core.context.dynamic_runtime()
    mb40 = 40 * 2**20 // 8
    puts = [ray.put(np.full(mb40, float(i))) for i in range(4)]

    @ray.remote
    def make(i):
        return np.full(mb40, 10.0 + i)

    made = [make.remote(i) for i in range(3)]
    assert [ray.get(r)[-1] for r in made] == [10.0, 11.0, 12.0]
    assert [ray.get(r)[0] for r in puts] == [0.0, 1.0, 2.0, 3.0]
    # Shared memory stays within the limit (objects; not the pool's and workers' free pages); the rest went to
    # files in the spill directory.
    assert 0 < rt.store_used <= limit
    in_shm = sum(os.stat(p).st_size for p in glob.glob(os.path.join(rt.shm_dir, f"rr-{rt.session}-*"))
                 if "-pool-" not in p and "-slot-" not in p and os.path.getsize(p) > 2**20)
    assert in_shm <= limit
    spilled = [p for p in glob.glob(os.path.join(rt.spill_dir, f"rr-{rt.session}-*")) if not p.endswith("-lock")]
    assert len(spilled) >= 3
    assert all(os.stat(p).st_mode & 0o077 == 0 for p in spilled)
    # A spilled value is an ordinary argument, and dropping its refs removes its file.
    assert ray.get(ray.remote(lambda a: float(a[-1])).remote(puts[3])) == 3.0
    del puts, made
    wait_until(lambda: not [p for p in glob.glob(os.path.join(rt.spill_dir, f"rr-{rt.session}-*"))
                            if not p.endswith("-lock")])
    wait_until(lambda: rt.store_used == 0)
    spill_dir = rt.spill_dir
    ray.shutdown()
    assert not os.path.exists(spill_dir)


def test_a_full_spill_directory_names_the_sizes(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1, object_store_memory=80 * 2**20)
    rt = ray.core.context.dynamic_runtime()
    kept = ray.put(np.ones(60 * 2**20 // 8))
    os.rename(rt.spill_dir, rt.spill_dir + ".away")     # the disk side refuses the write (as a full disk would)
    try:
        with pytest.raises(ray.exceptions.ObjectStoreFullError) as info:
            ray.put(np.ones(40 * 2**20 // 8))
    finally:
        os.rename(rt.spill_dir + ".away", rt.spill_dir)
    message = str(info.value)
    size = int(re.search(r"an object of (\d+) bytes", message).group(1))
    assert 40 * 2**20 <= size < 41 * 2**20
    assert str(80 * 2**20) in message and rt.spill_dir in message
    # Nothing was lost, and there is room again once the spill directory takes files.
    assert ray.get(kept)[-1] == 1.0
    assert ray.get(ray.put(np.full(40 * 2**20 // 8, 2.0)))[0] == 2.0


def test_small_dev_shm_falls_back_to_a_private_directory():
    free = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize
    dirs = session_dir.create(free * 4)
    directory, message = dirs.shm, dirs.warning
    try:
        assert directory != "/dev/shm" and os.path.isdir(directory)
        assert oct(os.stat(directory).st_mode & 0o777) == oct(0o700)
        assert "/dev/shm has only" in message and "MiB" in message
    finally:
        os.rmdir(directory)


def test_a_session_on_the_fallback_directory_works_and_cleans_up(fresh_rayreact, monkeypatch):
    ray = fresh_rayreact
    monkeypatch.setattr(session_dir, "create", lambda store: session_dir.SharedDirs(
        os.urandom(4).hex(), session_dir.private_temp_dir(), None, False, "/dev/shm is too small (simulated)"))
    with pytest.warns(UserWarning, match="too small"):
        ray.init(num_cpus=1)
    rt = ray.core.context.dynamic_runtime()
    assert rt.shm_dir != "/dev/shm"
    big = np.arange(2 * 2**20, dtype=np.float64)
    ref = ray.put(big)
    assert glob.glob(os.path.join(rt.shm_dir, f"rr-{rt.session}-*"))
    assert ray.get(ray.remote(lambda a: float(a.sum())).remote(ref)) == float(big.sum())
    directory = rt.shm_dir
    ray.shutdown()
    assert not os.path.exists(directory)


def test_segments_are_private_to_the_user(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1)
    rt = ray.core.context.dynamic_runtime()
    ref = ray.put(np.ones(2**20))
    paths = glob.glob(os.path.join(rt.shm_dir, f"rr-{rt.session}-*"))
    assert paths
    for path in paths:
        assert os.stat(path).st_mode & 0o077 == 0, path
    del ref
