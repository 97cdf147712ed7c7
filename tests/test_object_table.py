"""Unit tests of core.objects.ObjectTable's public interface (no processes: a table, a doorbell, files)."""

import os
import threading

import pytest

from rayreact import exceptions
from rayreact.core import channel, handles, ids, refcount, serialization
from rayreact.core.objects import PENDING, READY, ObjectTable
from rayreact.core.serialization import INLINE, SEGMENT
from rayreact.core.spilling import spilling


class CountingLock:
    """An RLock that counts how often it is taken."""

    def __init__(self):
        self._lock = threading.RLock()
        self.taken = 0

    def __enter__(self):
        self._lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc):
        self._lock.release()


@pytest.fixture
def env(tmp_path):
    saved = (spilling.shm_dir, spilling.spill_dir, spilling.limit, spilling._used)
    pool_limit = serialization.segment_pool.limit
    serialization.segment_pool.limit = 0          # released segments are unlinked at once
    gone = []
    bell = channel.Doorbell(str(tmp_path / "bell"), True)
    table = ObjectTable(CountingLock(), session="test", bell=bell, store_limit=1 << 30, spill_dir=None,
                        on_handles_gone=gone.append)
    spilling.configure(str(tmp_path), None, 1 << 30, table.shared_memory_used)
    made = []

    class Env:
        pass

    e = Env()
    e.table, e.gone, e.dir, e.bell = table, gone, tmp_path, bell

    def ref(oid=None):
        """An id the driver holds a live ref to (as an ObjectRef would), dropped at teardown."""
        oid = oid or ids.new_id()
        refcount.incref(oid)
        made.append(oid)
        return oid

    def drop(oid):
        made.remove(oid)
        refcount.decref(oid)
        table.release_dropped()

    def segment(size, directory=None):
        path = os.path.join(str(directory or tmp_path), f"seg-{ids.new_id().hex()}")
        with open(path, "wb") as f:
            f.write(b"x" * size)
        return path

    e.ref, e.drop, e.segment = ref, drop, segment
    yield e
    for oid in made:
        refcount.decref(oid)
    refcount.drain_released()
    serialization.segment_pool.limit = pool_limit
    spilling.configure(*saved)


def inline(value=1, contained=()):
    return (INLINE, serialization.serialize(value).pack(), list(contained), False)


def test_reserve_then_fill_makes_the_entry_ready_and_runs_its_dependents_once(env):
    t = env.table
    oid = env.ref()
    e = t.reserve(oid)
    assert e.state == PENDING and oid in t and not t.is_ready(oid)
    assert t.reserve(oid) is e, "reserving a pending id again gives the same entry"
    seen = []
    t.when_ready(oid, lambda o, entry: seen.append((o, entry)))
    t.fill(oid, inline(42))
    assert seen == [(oid, e)]
    assert t.is_ready(oid) and e.state == READY and not e.is_error
    assert t.load(e.desc) == 42
    t.fill(oid, inline(43))                      # a second value for a READY id is dropped
    assert t.load(t.get(oid).desc) == 42 and len(seen) == 1


def test_a_value_nobody_keeps_is_freed_when_it_arrives(env):
    t = env.table
    oid = ids.new_id()                           # no live ref
    t.reserve(oid)
    t.fill(oid, inline())
    assert oid not in t


def test_a_late_segment_for_an_unknown_id_goes_back(env):
    path = env.segment(4096)
    env.table.fill(ids.new_id(), (SEGMENT, path, [], False))
    assert not os.path.exists(path)
    assert env.table.store_used == 0


def test_dropping_the_last_ref_frees_the_entry_and_its_segment(env):
    t = env.table
    oid = env.ref()
    path = env.segment(8192)
    t.reserve(oid)
    t.fill(oid, (SEGMENT, path, [], False))
    assert t.get(oid).size == 8192 and t.store_used == 8192
    env.drop(oid)
    assert oid not in t and t.store_used == 0 and not os.path.exists(path)


def test_spilled_segments_are_not_counted_as_shared_memory(env, tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    spilling.configure(str(env.dir), str(spill), 1 << 30, env.table.shared_memory_used)
    oid = env.ref()
    env.table.reserve(oid)
    env.table.fill(oid, (SEGMENT, env.segment(4096, spill), [], False))
    assert env.table.store_used == 0
    env.drop(oid)
    assert oid not in env.table


def test_holds_keep_an_entry_after_its_ref_is_dropped(env):
    t = env.table
    oid = env.ref()
    t.reserve(oid)
    t.fill(oid, inline())
    t.hold([oid, oid])
    env.drop(oid)
    assert oid in t
    t.unhold([oid])
    assert oid in t
    t.unhold([oid])
    assert oid not in t


def test_holding_an_unknown_id_makes_it_a_reference_counting_error(env):
    t = env.table
    oid = env.ref()
    t.hold([oid])
    e = t.get(oid)
    assert e.state == READY and e.is_error and e.holds == 1
    assert isinstance(t.load(e.desc), exceptions.ReferenceCountingAssertionError)


def test_a_value_holds_the_refs_nested_in_it_until_it_goes(env):
    t = env.table
    inner, outer = env.ref(), env.ref()
    t.reserve(inner)
    t.fill(inner, inline("inner"))
    t.reserve(outer)
    t.fill(outer, inline("outer", contained=[inner]))
    assert t.get(inner).holds == 1
    env.drop(inner)
    assert inner in t, "the container still holds it"
    env.drop(outer)
    assert outer not in t and inner not in t


def test_shipping_lends_nested_refs_to_the_worker_until_it_releases_them(env):
    t = env.table
    inner, outer = env.ref(), env.ref()
    t.reserve(inner)
    t.fill(inner, inline())
    t.reserve(outer)
    t.fill(outer, inline(contained=[inner]))
    desc = t.ship(3, t.get(outer))
    assert desc is t.get(outer).desc
    t.ship(3, t.get(outer))
    assert t.get(inner).borrowers == {3: 2}
    env.drop(outer)
    env.drop(inner)
    assert inner in t, "worker 3 still borrows it"
    t.worker_released(3, [(inner, 1)])
    assert t.get(inner).borrowers == {3: 1}
    t.worker_released(3, [(inner, 1)])
    assert inner not in t


def test_lend_counts_only_entries_that_exist(env):
    t = env.table
    known, unknown = env.ref(), ids.new_id()
    t.reserve(known)
    t.lend(1, [known, unknown])
    assert t.get(known).borrowers == {1: 1} and unknown not in t


def test_a_dead_borrower_keeps_nothing(env):
    t = env.table
    oid = ids.new_id()
    t.worker_holds(5, [oid])                     # a nested call's return, made by worker 5
    e = t.get(oid)
    assert e.owner == 5 and e.borrowers == {5: 1} and e.state == PENDING
    t.fill(oid, inline())
    assert oid in t
    t.forget_borrower(5)
    assert oid not in t


def test_values_of_a_dead_owner_become_owner_died_errors(env):
    t = env.table
    mine, theirs = env.ref(), env.ref()
    path = env.segment(4096)
    t.reserve(mine)
    t.fill(mine, inline("driver's"))
    t.reserve(theirs, owner=7)
    t.fill(theirs, (SEGMENT, path, [], False))
    assert t.store_used == 4096
    t.owner_died(7)
    assert isinstance(t.load(t.get(theirs).desc), exceptions.OwnerDiedError) and t.get(theirs).is_error
    assert t.store_used == 0 and not os.path.exists(path)
    assert t.load(t.get(mine).desc) == "driver's"


def test_fill_error_and_lost(env):
    t = env.table
    oid = env.ref()
    t.reserve(oid)
    t.fill_error(oid, ValueError("boom"))
    assert t.get(oid).is_error and isinstance(t.load(t.get(oid).desc), ValueError)
    lost = env.ref()
    t.lost(lost)
    assert isinstance(t.load(t.get(lost).desc), exceptions.ReferenceCountingAssertionError)


def test_releasing_a_handle_key_reports_the_actor(env):
    t = env.table
    actor_id = os.urandom(16)
    key = env.ref(handles.key_of(actor_id))
    t.add_ready(key, (INLINE, b"", [], False))
    assert t.is_ready(key) and t.store_used == 0
    env.drop(key)
    assert key not in t and env.gone == [actor_id]


def test_watched_ready_hook_runs_only_while_the_watch_is_non_empty(env):
    watch, seen = {}, []
    t = ObjectTable(CountingLock(), session="t", bell=env.bell, store_limit=1 << 30, spill_dir=None,
                    on_handles_gone=env.gone.append, ready_watch=watch, on_watched_ready=seen.append)
    a, b = env.ref(), env.ref()
    t.reserve(a)
    t.fill(a, inline())
    assert seen == []
    watch["stream"] = object()
    t.reserve(b)
    t.fill(b, inline())
    assert seen == [b]


def test_adopt_skips_ids_the_table_has_and_leaves_their_items_alone(env):
    t = env.table
    present, new = env.ref(), env.ref()
    t.reserve(present)
    described = []

    def describe(item):
        described.append(item)
        return inline(item)

    t.adopt([(present, "a"), (new, "b")], describe)
    assert described == ["b"]
    assert t.get(present).state == PENDING and t.load(t.get(new).desc) == "b"


def test_fill_unready_fills_pending_and_vanished_ids_only(env):
    t = env.table
    pending, ready, vanished = env.ref(), env.ref(), env.ref()
    t.reserve(pending)
    t.reserve(ready)
    t.fill(ready, inline("kept"))
    t.fill_unready([pending, ready, vanished], inline("rerun failed"))
    assert t.load(t.get(pending).desc) == "rerun failed"
    assert t.load(t.get(vanished).desc) == "rerun failed"
    assert t.load(t.get(ready).desc) == "kept"


def test_reserve_all_and_fill_all(env):
    t = env.table
    a, b = env.ref(), env.ref()
    t.reserve_all([a, b])
    assert t.get(a).state == t.get(b).state == PENDING
    t.fill_all([(a, inline(1)), (b, inline(2))])
    assert [t.load(t.get(o).desc) for o in (a, b)] == [1, 2]


def test_only_the_methods_for_other_modules_take_the_lock(env):
    t = env.table
    lock = t.lock
    a, b = env.ref(), env.ref()
    before = lock.taken
    t.reserve(a)                                 # the hot path: the caller holds the lock
    t.hold([a])
    t.fill(a, inline())
    t.ship(0, t.get(a))
    t.unhold([a])
    t.release_dropped()
    assert lock.taken == before
    t.reserve_all([b])
    t.fill_all([(b, inline())])
    t.adopt([(ids.new_id(), 1)], inline)
    t.fill_unready([b], inline())
    assert lock.taken == before + 4


def test_place_inlines_small_values_and_writes_big_ones(env):
    t = env.table
    small = t.place({"a": 1})
    assert small[0] == INLINE and t.load(small) == {"a": 1}
    big = t.place(b"y" * (serialization.INLINE_LIMIT + 1))
    assert big[0] == SEGMENT and os.path.dirname(big[1]) == str(env.dir)
    assert t.load(big) == b"y" * (serialization.INLINE_LIMIT + 1)
    t.segments.forget(big[1])
    os.unlink(big[1])


def test_place_past_the_limit_without_a_spill_directory_fails(env):
    t = ObjectTable(CountingLock(), session="t", bell=env.bell, store_limit=1000, spill_dir=None,
                    on_handles_gone=env.gone.append)
    assert t.place(b"small")[0] == INLINE
    with pytest.raises(exceptions.ObjectStoreFullError):
        t.place(b"z" * (serialization.INLINE_LIMIT + 1))


def test_clear_forgets_everything(env):
    t = env.table
    oid = env.ref()
    t.reserve(oid)
    t.clear()
    assert oid not in t and t.entries == {}
