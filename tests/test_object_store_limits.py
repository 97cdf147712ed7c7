"""rayreact's object-store limits: a bounded store fails clearly, and a small /dev/shm falls back.

Real Ray spills to disk instead of failing a put, so the bound itself is rayreact's own
behaviour (issue 3); what both share is checked elsewhere.  Each test owns its session.
"""

import glob
import os

import numpy as np
import pytest

from rayreact.core import runtime




def test_put_beyond_object_store_memory_names_the_sizes(fresh_rayreact):
    ray = fresh_rayreact
    ray.init(num_cpus=1, object_store_memory=64 * 2**20)
    kept = ray.put(np.ones(40 * 2**20 // 8))
    with pytest.raises(ray.exceptions.ObjectStoreFullError) as info:
        ray.put(np.ones(40 * 2**20 // 8))
    message = str(info.value)
    assert "bytes" in message and str(64 * 2**20) in message
    # Nothing was lost, and dropping a ref gives its room back.
    assert ray.get(kept)[-1] == 1.0
    del kept
    again = ray.put(np.full(40 * 2**20 // 8, 2.0))
    assert ray.get(again)[0] == 2.0


def test_small_dev_shm_falls_back_to_a_private_directory():
    free = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize
    directory, message = runtime._shm_dir(free * 4)
    try:
        assert directory != "/dev/shm" and os.path.isdir(directory)
        assert oct(os.stat(directory).st_mode & 0o777) == oct(0o700)
        assert "/dev/shm has only" in message and "MiB" in message
    finally:
        os.rmdir(directory)


def test_a_session_on_the_fallback_directory_works_and_cleans_up(fresh_rayreact, monkeypatch):
    ray = fresh_rayreact
    monkeypatch.setattr(runtime, "_shm_dir", lambda store: runtime._fallback_dir(
        "/dev/shm is too small (simulated)"))
    with pytest.warns(UserWarning, match="too small"):
        ray.init(num_cpus=1)
    rt = ray.core.context.current
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
    rt = ray.core.context.current
    ref = ray.put(np.ones(2**20))
    paths = glob.glob(os.path.join(rt.shm_dir, f"rr-{rt.session}-*"))
    assert paths
    for path in paths:
        assert os.stat(path).st_mode & 0o077 == 0, path
    del ref
