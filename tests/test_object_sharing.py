"""Large values written once and shared: snapshots stay snapshots, recycled memory never shows through.

rayreact writes one segment for identical large values (the same array passed to many
calls or put again: compared byte for byte, then linked; once linked, only the pages the
kernel saw written are compared again), reuses freed segments, keeps
read-only mappings by inode, and hands a worker's fresh result array over in the file
it was born in (core.handoff) unless the worker still holds it.  Each test here fails if one of those shortcuts ever
lets a caller's later mutation, or a recycled file's new contents, reach a value that
was already submitted or handed out.  They run on both backends.
"""

import ctypes
import mmap
import os
import threading

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

    def kept_totals(self):
        return [float(a.sum()) for a in self.kept]

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


# --- changes the kernel makes, or that bypass this process' page tables ------------------------
# Each array below is first passed unchanged three times (the second match starts rayreact's
# write watch), then changed by one route, then passed again: the callee must see the change.

def _passed_unchanged_then(ray_backend, keeper, arr, change):
    before = [keeper.total.remote(arr) for _ in range(3)]
    expected_before = float(arr.sum())
    change(arr)
    after = keeper.total.remote(arr)
    expected_after = float(arr.sum())
    assert expected_after != expected_before            # the route really changed the bytes
    assert ray_backend.get(before) == [expected_before] * 3
    assert ray_backend.get(after) == expected_after


def _first_whole_page(arr):
    return (-arr.ctypes.data) % mmap.PAGESIZE // arr.itemsize


@pytest.mark.parametrize("where", ["head", "first whole page", "middle", "last whole page", "tail"])
def test_a_watched_array_changed_in_place_is_seen(ray_backend, keepers, where):
    arr = np.ones(BIG)
    page = mmap.PAGESIZE // arr.itemsize
    first = _first_whole_page(arr)
    last_whole = first + ((BIG - first) // page - 1) * page
    index = {"head": 0, "first whole page": first, "middle": BIG // 2,
             "last whole page": last_whole, "tail": BIG - 1}[where]

    def change(a):
        a[index] = 5.0

    _passed_unchanged_then(ray_backend, keepers[0], arr, change)


def test_a_watched_array_filled_by_the_kernel_is_seen(ray_backend, keepers, tmp_path):
    source = tmp_path / "bytes"
    source.write_bytes(np.full(2048, 3.0).tobytes())
    arr = np.ones(BIG)

    def readinto(a):
        with open(source, "rb") as f:
            assert f.readinto(memoryview(a)[BIG // 3:BIG // 3 + 2048]) == 2048 * 8

    _passed_unchanged_then(ray_backend, keepers[1], arr, readinto)

    def preadv(a):
        fd = os.open(source, os.O_RDONLY)
        try:
            assert os.preadv(fd, [memoryview(a)[BIG - 1024:]], 0) == 1024 * 8
        finally:
            os.close(fd)

    _passed_unchanged_then(ray_backend, keepers[1], np.ones(BIG), preadv)


def test_a_watched_array_changed_by_another_thread_is_seen(ray_backend, keepers):
    def from_thread(a):
        t = threading.Thread(target=a.__setitem__, args=(slice(1000, 600_000), 9.0))
        t.start()
        t.join()

    _passed_unchanged_then(ray_backend, keepers[2], np.ones(BIG), from_thread)


def _anonymous_array(nbytes):
    mem = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    arr = np.frombuffer(mem, dtype=np.float64)
    arr[:] = 1.0
    return mem, arr


def test_a_watched_array_whose_pages_were_dropped_is_seen(ray_backend, keepers):
    # madvise(DONTNEED) on private memory: the pages read as zeros afterwards, with no write.
    mem, arr = _anonymous_array(BIG * 8)

    def drop(a):
        mem.madvise(mmap.MADV_DONTNEED, 64 * mmap.PAGESIZE, 16 * mmap.PAGESIZE)

    _passed_unchanged_then(ray_backend, keepers[0], arr, drop)
    del arr


def test_a_watched_array_mapped_over_is_seen(ray_backend, keepers):
    # New memory mapped at the very same address (MAP_FIXED): the old record must not be trusted.
    mem, arr = _anonymous_array(BIG * 8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    start, length = arr.ctypes.data + 32 * mmap.PAGESIZE, 64 * mmap.PAGESIZE

    def map_over(a):
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10          # MAP_FIXED
        assert libc.mmap(start, length, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0) == start

    _passed_unchanged_then(ray_backend, keepers[1], arr, map_over)
    del arr


def test_a_watched_array_on_a_shared_file_written_elsewhere_is_seen(ray_backend, keepers, tmp_path):
    # A MAP_SHARED file mapping changes when the file is written through another descriptor.
    path = tmp_path / "shared.f64"
    path.write_bytes(np.ones(BIG).tobytes())
    arr = np.memmap(path, dtype=np.float64, mode="r+", shape=(BIG,))

    def write_file(a):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, np.full(4096, 2.0).tobytes(), 8 * (BIG // 2))
        finally:
            os.close(fd)

    _passed_unchanged_then(ray_backend, keepers[2], arr, write_file)
    del arr


def test_an_array_changed_a_little_each_round_keeps_every_rounds_value(ray_backend, keepers):
    # rayreact writes only the changed pages into the file of the last round's value once nothing
    # uses that file any more: a value an actor still holds must never change.
    arr = np.ones(BIG + 1234)               # a size of its own: nothing earlier passed looks like it
    a, b, _ = keepers
    start = len(ray_backend.get(b.kept_totals.remote()))
    kept_totals = []
    for round_ in range(12):
        arr[(round_ * 4099) % arr.size] = 10.0 + round_
        assert ray_backend.get(a.total.remote(arr)) == float(arr.sum())
        if round_ % 4 == 1:
            ray_backend.get(b.keep.remote(arr))
            kept_totals.append(float(arr.sum()))
    assert ray_backend.get(b.kept_totals.remote())[start:] == kept_totals


def test_a_put_changed_a_little_each_round_keeps_every_rounds_value(ray_backend):
    # The same for values the script holds after dropping their refs.
    arr = np.ones(BIG + 4321)
    held = []
    for round_ in range(10):
        arr[(round_ * 4099) % arr.size] = 10.0 + round_
        value = ray_backend.get(ray_backend.put(arr))
        assert float(value.sum()) == float(arr.sum())
        if round_ % 3 == 1:
            held.append((value, float(arr.sum())))
        del value
    assert [float(value.sum()) for value, _ in held] == [total for _, total in held]


def test_a_torch_tensor_changed_in_place_between_calls_is_seen(ray_backend, keepers):
    torch = pytest.importorskip("torch")
    tensor = torch.ones(BIG, dtype=torch.float64)

    @ray_backend.remote
    def total(t):
        return float(t.sum())

    before = [ray_backend.get(total.remote(tensor)) for _ in range(3)]
    tensor[BIG // 2:].add_(1.0)                         # in place, by torch's own kernels
    after = ray_backend.get(total.remote(tensor))
    tensor.zero_()
    assert before == [float(BIG)] * 3
    assert after == float(BIG) + BIG - BIG // 2
