"""Calls and replies larger than a channel's ring (1 MiB) work as in Ray, and leave every worker usable."""


def numbers(n):
    return list(range(n))


def count_refs(holder):
    return len(holder["refs"])


def one():
    return 1


def test_a_reply_larger_than_a_ring(ray_backend):
    n = 40_000                                 # 40,000 return ids: a reply of about 1.3 MB
    refs = ray_backend.remote(num_returns=n)(numbers).remote(n)
    assert len(refs) == n
    assert ray_backend.get([refs[0], refs[n // 2], refs[-1]], timeout=300) == [0, n // 2, n - 1]


def test_a_call_larger_than_a_ring(ray_backend):
    refs = [ray_backend.put(i) for i in range(40_000)]     # nested in a dict: passed as refs, not values
    assert ray_backend.get(ray_backend.remote(count_refs).remote({"refs": refs}), timeout=300) == 40_000


def test_workers_stay_usable_after_large_messages(ray_backend):
    n = 40_000
    for _ in range(3):                           # more such calls than there are CPUs
        refs = ray_backend.remote(num_returns=n)(numbers).remote(n)
        assert ray_backend.get(refs[-1], timeout=300) == n - 1
    assert ray_backend.get([ray_backend.remote(one).remote() for _ in range(8)], timeout=60) == [1] * 8
