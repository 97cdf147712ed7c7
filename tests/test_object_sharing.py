"""Large values written once and shared: snapshots stay snapshots, recycled memory never shows through.

rayreact writes one segment for identical large values (the same array passed to many
calls or put again: compared byte for byte, then linked), reuses freed segments, keeps
read-only mappings by inode, and hands a worker's fresh result array over in the file
it was born in (core.handoff) unless the worker still holds it.  Each test here fails if one of those shortcuts ever
lets a caller's later mutation, or a recycled file's new contents, reach a value that
was already submitted or handed out.  They run on both backends.
"""

import numpy as np
import pytest

BIG = 1_000_000  # 8 MB of float64: always a shared-memory segment


class Keeper:
    def __init__(self):
        self.kept = []

    def last(self, arr):
        return float(arr[-1])

    def total(self, arr):
        return float(arr.sum())

    def ends(self, arr):
        return float(arr.flat[0]), float(arr.flat[-1]), arr.dtype.str, arr.shape

    def keep(self, arr):
        self.kept.append(arr)
        return len(self.kept)

    def kept_ends(self):
        return [(float(a[0]), float(a[-1])) for a in self.kept]

    def copy(self, arr):
        return np.array(arr)

    def fill_kept(self, value):
        # Returns an array it keeps (and a view of it): later changes must not reach the results.
        self.buffer = np.full(BIG, value)
        return self.buffer

    def fill_kept_view(self, value):
        self.buffer = np.full(BIG + 10, value)
        return self.buffer[5:BIG + 5]

    def change_kept(self, value):
        self.buffer[:] = value
        return float(self.buffer[0])

    def fresh_pair(self, value):
        out = np.empty(BIG)
        out[:] = value
        return out, int(value)


@pytest.fixture(scope="module")
def keepers(ray_backend):
    actors = [ray_backend.remote(Keeper).remote() for _ in range(3)]
    ray_backend.get([a.last.remote(np.zeros(1)) for a in actors])
    return actors


def test_mutation_between_calls_is_seen_only_by_later_calls(ray_backend, keepers):
    arr = np.zeros(BIG)
    refs, expected = [], []
    for i in range(8):
        if i % 2:
            arr[-1] = i          # a change at the very end: a comparison must read it all
        refs.append(keepers[i % 3].last.remote(arr))
        expected.append(float(arr[-1]))
    arr[-1] = -1.0
    assert ray_backend.get(refs) == expected


def test_a_change_anywhere_in_a_40_mb_array_is_seen(ray_backend, keepers):
    # Large comparisons run in two halves at once: a change in either half must count.
    arr = np.zeros(5_000_000)
    refs, expected = [], []
    for i, where in enumerate([None, 10, None, 4_999_990, None, 2_500_001, None]):
        if where is not None:
            arr[where] = i
        refs.append(keepers[i % 3].total.remote(arr))
        expected.append(float(arr.sum()))
    arr[:] = 1.0
    assert ray_backend.get(refs) == expected


def test_same_array_to_many_actors_then_changed_everywhere(ray_backend, keepers):
    arr = np.arange(BIG, dtype=np.float64)
    first = [a.keep.remote(arr) for a in keepers]
    arr += 1000.0
    second = [a.keep.remote(arr) for a in keepers]
    arr[:] = -5.0
    ray_backend.get(first + second)
    for kept in ray_backend.get([a.kept_ends.remote() for a in keepers]):
        assert kept[-2:] == [(0.0, BIG - 1.0), (1000.0, BIG + 999.0)]


def test_same_memory_with_another_dtype_or_shape_is_another_value(ray_backend, keepers):
    arr = np.arange(BIG, dtype=np.float64)
    a, b, c = keepers
    as_float = a.ends.remote(arr)
    as_int = b.ends.remote(arr.view(np.int64))
    as_matrix = c.ends.remote(arr.reshape(1000, -1))
    assert ray_backend.get(as_float) == (0.0, BIG - 1.0, "<f8", (BIG,))
    first, last, dtype, shape = ray_backend.get(as_int)
    assert (dtype, shape) == ("<i8", (BIG,)) and last == float(np.float64(BIG - 1).view(np.int64))
    assert ray_backend.get(as_matrix)[2:] == ("<f8", (1000, BIG // 1000))


def test_repeated_puts_of_a_changing_array(ray_backend):
    arr = np.zeros(BIG)
    refs = []
    for i in range(6):
        if i in (2, 4):
            arr[-1] = i
        refs.append(ray_backend.put(arr))
    arr[:] = 7.0
    values = ray_backend.get(refs)
    assert [float(v[-1]) for v in values] == [0.0, 0.0, 2.0, 2.0, 4.0, 4.0]
    assert all(float(v[0]) == 0.0 and not v.flags.writeable for v in values)


def test_values_held_after_their_refs_survive_recycling(ray_backend, keepers):
    # Values the script still holds keep their memory, however much is freed and rewritten after.
    held = [ray_backend.get(ray_backend.put(np.full(BIG, float(i)))) for i in range(3)]
    copies = ray_backend.get([a.copy.remote(np.full(BIG, 10.0 + i)) for i, a in enumerate(keepers)])
    for round_ in range(4):
        fresh = ray_backend.get([a.copy.remote(np.full(BIG, 100.0 + round_)) for a in keepers])
        assert [float(f[BIG // 2]) for f in fresh] == [100.0 + round_] * 3
        del fresh
        for i in range(3):
            ray_backend.get(ray_backend.put(np.full(BIG, -1.0)))
    assert [(float(h[0]), float(h[-1])) for h in held] == [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)]
    assert [(float(c[0]), float(c[-1])) for c in copies] == [(10.0, 10.0), (11.0, 11.0), (12.0, 12.0)]


def test_results_read_round_after_round_are_each_rounds_own(ray_backend, keepers):
    previous = None
    for round_ in range(5):
        arr = np.full(BIG, float(round_))
        copies = ray_backend.get([a.copy.remote(arr) for a in keepers])
        assert all(float(c[0]) == round_ and float(c[-1]) == round_ for c in copies)
        if previous is not None:
            assert all(float(p[0]) == round_ - 1 and float(p[-1]) == round_ - 1 for p in previous)
        previous = copies


def test_a_returned_array_the_actor_keeps_is_a_snapshot(ray_backend, keepers):
    a = keepers[0]
    for method in (a.fill_kept, a.fill_kept_view):
        for _ in range(3):          # the first call finds no slot; later ones are born in one
            first = method.remote(1.0)
            assert float(ray_backend.get(first)[-1]) == 1.0
        assert ray_backend.get(a.change_kept.remote(2.0)) == 2.0
        again = method.remote(3.0)
        assert ray_backend.get(a.change_kept.remote(4.0)) == 4.0
        value, later = ray_backend.get(first), ray_backend.get(again)
        assert (float(value[0]), float(value[-1])) == (1.0, 1.0)
        assert (float(later[0]), float(later[-1])) == (3.0, 3.0)


def test_fresh_results_of_one_worker_never_share_memory(ray_backend, keepers):
    a = keepers[1]
    pairs = [ray_backend.get(a.fresh_pair.remote(float(i))) for i in range(6)]
    assert [tag for _, tag in pairs] == list(range(6))
    assert all(float(arr[0]) == i and float(arr[-1]) == i and not arr.flags.writeable
               for i, (arr, _) in enumerate(pairs))

    @ray_backend.remote
    def total(pair):
        return float(pair[0].sum())

    refs = [a.fresh_pair.remote(float(i)) for i in range(3)]
    assert ray_backend.get([total.remote(r) for r in refs]) == [0.0, float(BIG), 2.0 * BIG]
    assert [float(ray_backend.get(r)[0].sum()) for r in refs] == [0.0, float(BIG), 2.0 * BIG]
