"""ObjectRefs and values: identity, passing rules, snapshot semantics, read-only arrays, lifetime.

A value is a snapshot taken at ``put`` or at submission: neither side ever sees
the other's later mutation.  numpy arrays come back read-only (small and large
ones alike, in Ray 2.60) and stay so inside tasks and actors.
"""

import gc
import pickle

import cloudpickle
import numpy as np
import pytest
from conftest import backend_fixture

ray_backend = backend_fixture(replay=True, colocate=True)

BIG = 1_000_000  # elements; 8 MB of float64, well past any inline-object threshold


class Holder:
    """Actor body that keeps whatever it is given."""

    def __init__(self, value=None):
        self.value = value

    def set(self, value):
        self.value = value

    def get(self):
        return self.value

    def first(self):
        return self.value[0]


# --- ObjectRef identity ----------------------------------------------------------------


def test_refs_are_hashable_and_compare_by_identity(ray_backend):
    a, b = ray_backend.put(1), ray_backend.put(1)
    assert a == a and a != b
    table = {a: "a", b: "b"}
    assert table[a] == "a" and table[b] == "b"
    assert len({a, a, b}) == 2


def test_ref_survives_pickle_roundtrip(ray_backend):
    ref = ray_backend.put({"x": 1})
    copy = pickle.loads(pickle.dumps(ref))
    assert copy == ref and hash(copy) == hash(ref)
    assert ray_backend.get(copy) == {"x": 1}


def test_ref_survives_cloudpickle_roundtrip(ray_backend):
    ref = ray_backend.put([1, 2])
    assert ray_backend.get(cloudpickle.loads(cloudpickle.dumps(ref))) == [1, 2]


def test_ref_is_an_object_ref(ray_backend):
    ref = ray_backend.remote(lambda: 1).remote()
    assert isinstance(ref, ray_backend.ObjectRef)
    assert isinstance(ray_backend.put(1), ray_backend.ObjectRef)


# --- passing rules ---------------------------------------------------------------------


def test_ref_passed_directly_is_resolved(ray_backend):
    ref = ray_backend.put(20)
    f = ray_backend.remote(lambda x: (type(x).__name__, x + 1))
    assert ray_backend.get(f.remote(ref)) == ("int", 21)


def test_ref_passed_as_keyword_is_resolved(ray_backend):
    ref = ray_backend.put(20)
    f = ray_backend.remote(lambda x=0: x + 1)
    assert ray_backend.get(f.remote(x=ref)) == 21


def test_task_output_passed_directly_is_resolved(ray_backend):
    square = ray_backend.remote(lambda x: x * x)
    assert ray_backend.get(square.remote(square.remote(3))) == 81


def test_refs_nested_in_containers_are_not_resolved(ray_backend):
    a, b = ray_backend.put("a"), ray_backend.put("b")

    def inspect(lst, dct):
        return (
            [isinstance(x, ray_backend.ObjectRef) for x in lst],
            isinstance(dct["k"], ray_backend.ObjectRef),
            ray_backend.get(lst) + [ray_backend.get(dct["k"])],
        )

    f = ray_backend.remote(inspect)
    assert ray_backend.get(f.remote([a, b], {"k": a})) == ([True, True], True, ["a", "b", "a"])


def test_refs_inside_put_value_stay_refs(ray_backend):
    inner = ray_backend.put(5)
    outer = ray_backend.put({"inner": inner, "list": [inner]})
    value = ray_backend.get(outer)
    assert value["inner"] == inner and value["list"] == [inner]
    assert ray_backend.get(value["inner"]) == 5


def test_task_may_return_refs(ray_backend):
    def make():
        return [ray_backend.put("made in task")]

    (ref,) = ray_backend.get(ray_backend.remote(make).remote())
    assert isinstance(ref, ray_backend.ObjectRef)
    assert ray_backend.get(ref) == "made in task"


def test_ref_passed_through_a_task_keeps_its_value_alive(ray_backend):
    passthrough = ray_backend.remote(lambda box: box)
    ref = ray_backend.put(np.arange(BIG))
    out = ray_backend.get(passthrough.remote([ref]))
    del ref
    gc.collect()
    np.testing.assert_array_equal(ray_backend.get(out[0])[:3], [0, 1, 2])
    assert ray_backend.get(out[0]).shape == (BIG,)


def test_value_from_get_outlives_its_ref(ray_backend):
    # A zero-copy view must keep its buffer: dropping the ref and churning the
    # store must not change an array the caller still holds.
    ref = ray_backend.put(np.full(BIG, 3, dtype=np.int64))
    arr = ray_backend.get(ref)
    del ref
    gc.collect()
    for i in range(10):
        other = ray_backend.put(np.full(BIG, -i, dtype=np.int64))
        ray_backend.get(ray_backend.remote(lambda a: int(a[0])).remote(other))
        del other
    assert arr.shape == (BIG,) and int(arr.min()) == 3 and int(arr.max()) == 3


def test_argument_ref_kept_alive_while_task_runs(ray_backend, signal):
    def total_after_signal(sig, arr):
        ray_backend.get(sig.wait.remote())
        return int(arr.sum())

    ref = ray_backend.put(np.ones(BIG, dtype=np.int64))
    out = ray_backend.remote(total_after_signal).remote(signal, ref)
    del ref  # the pending task still holds the value
    gc.collect()
    signal.send.remote()
    assert ray_backend.get(out, timeout=60) == BIG


def test_many_puts_and_drops(ray_backend):
    # Dropped values must be released, not pile up (would exhaust a bounded store).
    keep = ray_backend.put(np.full(10, 7))
    for i in range(50):
        ref = ray_backend.put(np.full(BIG, i, dtype=np.uint8))
        assert ray_backend.get(ref)[-1] == i
        del ref
    assert ray_backend.get(keep)[0] == 7


# --- snapshot semantics ------------------------------------------------------------------


@pytest.mark.parametrize("size", [10, BIG], ids=["small", "big"])
def test_put_snapshots_array(ray_backend, size):
    arr = np.zeros(size)
    ref = ray_backend.put(arr)
    arr[0] = 99.0
    assert ray_backend.get(ref)[0] == 0.0


def test_put_snapshots_list(ray_backend):
    lst = [1, [2, 3]]
    ref = ray_backend.put(lst)
    lst.append(4)
    lst[1].append(5)
    assert ray_backend.get(ref) == [1, [2, 3]]


def test_put_snapshots_dict(ray_backend):
    dct = {"a": 1, "nested": {"b": 2}}
    ref = ray_backend.put(dct)
    dct["a"] = 100
    dct["nested"]["c"] = 3
    assert ray_backend.get(ref) == {"a": 1, "nested": {"b": 2}}


def test_each_get_returns_a_fresh_mutable_container(ray_backend):
    ref = ray_backend.put({"xs": [1]})
    first = ray_backend.get(ref)
    first["xs"].append(2)
    first["new"] = True
    assert ray_backend.get(ref) == {"xs": [1]}


@pytest.mark.parametrize("size", [10, BIG], ids=["small", "big"])
def test_argument_is_snapshot_at_submission(ray_backend, signal, size):
    def total_after_signal(sig, arr):
        ray_backend.get(sig.wait.remote())
        return float(arr.sum())

    arr = np.ones(size)
    ref = ray_backend.remote(total_after_signal).remote(signal, arr)
    arr[:] = 5.0  # mutated while the task is provably still waiting
    signal.send.remote()
    assert ray_backend.get(ref, timeout=60) == float(size)


def test_list_argument_is_snapshot_at_submission(ray_backend, signal):
    def after_signal(sig, lst):
        ray_backend.get(sig.wait.remote())
        return lst

    lst = [1, 2]
    ref = ray_backend.remote(after_signal).remote(signal, lst)
    lst.append(3)
    signal.send.remote()
    assert ray_backend.get(ref, timeout=60) == [1, 2]


def test_callee_mutating_list_argument_does_not_affect_caller(ray_backend):
    def mutate(lst, dct):
        lst.append("callee")
        dct["callee"] = True
        return lst, dct

    lst, dct = [1], {"a": 1}
    out_lst, out_dct = ray_backend.get(ray_backend.remote(mutate).remote(lst, dct))
    assert out_lst == [1, "callee"] and out_dct == {"a": 1, "callee": True}
    assert lst == [1] and dct == {"a": 1}


def test_callee_mutating_its_array_copy_does_not_affect_caller(ray_backend):
    def mutate(arr):
        mine = arr.copy()
        mine[:] = -1
        return mine

    arr = np.arange(BIG)
    out = ray_backend.get(ray_backend.remote(mutate).remote(arr))
    assert out[0] == -1
    assert arr[0] == 0 and arr[-1] == BIG - 1


def test_callee_mutating_put_value_does_not_affect_other_readers(ray_backend):
    def mutate(lst):
        lst[0] = "changed"
        return lst

    ref = ray_backend.put(["orig"])
    assert ray_backend.get(ray_backend.remote(mutate).remote(ref)) == ["changed"]
    assert ray_backend.get(ref) == ["orig"]
    assert ray_backend.get(ray_backend.remote(lambda x: x).remote(ref)) == ["orig"]


def test_actor_keeps_snapshot_of_argument(ray_backend):
    holder = ray_backend.remote(Holder).remote()
    arr = np.zeros(BIG)
    ray_backend.get(holder.set.remote(arr))
    arr[0] = 42.0
    assert ray_backend.get(holder.first.remote()) == 0.0


def test_actor_state_not_changed_by_mutating_returned_value(ray_backend):
    holder = ray_backend.remote(Holder).remote({"xs": [1, 2]})
    got = ray_backend.get(holder.get.remote())
    got["xs"].append(3)
    assert ray_backend.get(holder.get.remote()) == {"xs": [1, 2]}


def test_constructor_argument_is_snapshot(ray_backend):
    lst = [1, 2]
    holder = ray_backend.remote(Holder).remote(lst)
    lst.append(3)
    assert ray_backend.get(holder.get.remote()) == [1, 2]


# --- read-only arrays ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [10, BIG], ids=["small", "big"])
def test_array_from_get_is_read_only(ray_backend, size):
    arr = ray_backend.get(ray_backend.put(np.zeros(size)))
    assert not arr.flags.writeable
    with pytest.raises(ValueError):
        arr[0] = 1.0
    with pytest.raises(ValueError):
        arr += 1


@pytest.mark.parametrize("size", [10, BIG], ids=["small", "big"])
def test_array_returned_by_task_is_read_only(ray_backend, size):
    arr = ray_backend.get(ray_backend.remote(lambda n: np.ones(n)).remote(size))
    assert not arr.flags.writeable
    with pytest.raises(ValueError):
        arr[0] = 0.0


@pytest.mark.parametrize("size", [10, BIG], ids=["small", "big"])
def test_array_argument_is_read_only_in_task(ray_backend, size):
    def try_write(arr):
        writeable = arr.flags.writeable
        try:
            arr[0] = 1.0
        except ValueError:
            return writeable, "ValueError"
        return writeable, "wrote"

    assert ray_backend.get(ray_backend.remote(try_write).remote(np.zeros(size))) == (False, "ValueError")


def test_write_to_read_only_argument_surfaces_as_task_error(ray_backend):
    def write(arr):
        arr[0] = 1.0

    with pytest.raises(ValueError):
        ray_backend.get(ray_backend.remote(write).remote(np.zeros(BIG)))


def test_arrays_nested_in_containers_are_read_only(ray_backend):
    value = ray_backend.get(ray_backend.put({"obs": np.zeros(BIG), "pair": [np.ones(4)]}))
    assert not value["obs"].flags.writeable
    assert not value["pair"][0].flags.writeable


def test_copy_of_read_only_array_is_writeable(ray_backend):
    arr = ray_backend.get(ray_backend.put(np.zeros(BIG))).copy()
    arr[0] = 3.0
    assert arr[0] == 3.0


def test_array_values_and_dtypes_roundtrip(ray_backend):
    for arr in [np.arange(12, dtype=np.int16).reshape(3, 4), np.zeros((2, 0)), np.array(["a", "bc"]),
                np.random.default_rng(0).random((64, 64)).astype(np.float32), np.arange(10)[::2]]:
        got = ray_backend.get(ray_backend.put(arr))
        assert got.dtype == arr.dtype and got.shape == arr.shape
        np.testing.assert_array_equal(got, arr)


NUMPY_VALUES = [np.int64(-3), np.float32(1.5), np.bool_(True), np.uint8(255), np.complex64(1 - 2j),
                np.float16(0.25), np.longdouble(2.5), np.datetime64("2020-01-02"), np.timedelta64(90, "s"),
                np.str_("text"), np.zeros(4, np.float32), np.arange(6, dtype=">i4").reshape(2, 3), np.array(7.0),
                np.ones((0, 3), np.uint16), np.arange(3000, dtype=np.float64), np.asfortranarray(np.ones((3, 4))),
                np.array(["2021-03-04"], dtype="M8[D]"), np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])]


def describe(value):
    """What a reader can tell about a numpy value: its type, dtype, shape, contents and writeability."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes(), value.flags.writeable)
    return (type(value).__name__, value.dtype.str, value.item())


@pytest.mark.parametrize("value", NUMPY_VALUES, ids=lambda v: f"{type(v).__name__}-{v.dtype.str}-{np.shape(v)}")
def test_numpy_scalars_and_arrays_keep_type_dtype_and_flags(ray_backend, value):
    # Arrays from get are read-only (C- and F-ordered alike) except datetime ones, which numpy pickles in band;
    # scalars keep their numpy type.  As in Ray.
    expected = describe(ray_backend.get(ray_backend.put(value)))
    assert expected[:3] == describe(value)[:3]
    if isinstance(value, np.ndarray):
        assert expected[3] == value.tobytes() and expected[4] is (value.dtype.kind in "mM")
    else:
        assert expected[2] == value.item()

    def echo(x):
        return x, describe(x)

    holder = ray_backend.remote(Holder).remote()
    ray_backend.get(holder.set.remote(value))
    (returned, seen_by_task), from_actor = ray_backend.get([ray_backend.remote(echo).remote(value), holder.get.remote()])
    assert seen_by_task == expected
    assert describe(returned) == expected
    assert describe(from_actor) == expected


def _torch_values():
    torch = pytest.importorskip("torch")
    base = torch.arange(12, dtype=torch.float32)
    return {
        "float32": torch.ones(4), "int64-2d": torch.arange(6).reshape(2, 3), "0-d": torch.tensor(2.5),
        "empty": torch.zeros(0, 3), "bool": torch.tensor([True, False]), "big": torch.arange(500_000, dtype=torch.float64),
        "view-with-offset": base[4:8], "transposed": base.reshape(3, 4).t(), "bfloat16": torch.ones(3, dtype=torch.bfloat16),
        "requires-grad": torch.ones(3, requires_grad=True), "parameter": torch.nn.Parameter(torch.ones(2)),
        "complex": torch.tensor([1 + 2j]), "conj": torch.tensor([1 + 2j]).conj(),
    }


TORCH_CASES = ["float32", "int64-2d", "0-d", "empty", "bool", "big", "view-with-offset", "transposed", "bfloat16",
               "requires-grad", "parameter", "complex", "conj"]


def describe_tensor(t):
    """What a reader can tell about a tensor: its class, dtype, shape, strides, storage, grad flag, contents."""
    return (type(t).__name__, str(t.dtype), tuple(t.shape), t.stride(), t.storage_offset(),
            t.untyped_storage().nbytes(), t.requires_grad, t.is_conj(), t.detach().resolve_conj().tolist())


@pytest.mark.parametrize("case", TORCH_CASES)
def test_torch_tensors_arrive_as_torch_sends_them(ray_backend, case):
    # Whatever path a tensor takes (out of band when plain, torch's own reduction otherwise), a reader
    # sees what Ray's reader sees: the same class, dtype, shape, strides, storage, grad flag and values,
    # and a tensor it may write to without touching the sender's.
    value = _torch_values()[case]
    got = ray_backend.get(ray_backend.put(value))
    assert describe_tensor(got) == describe_tensor(value)

    def echo_and_bump(t):
        seen = describe_tensor(t)
        if not t.requires_grad and t.numel() and t.dtype.is_floating_point:
            t.add_(1)                      # the reader's copy is its own
        return seen

    assert ray_backend.get(ray_backend.remote(echo_and_bump).remote(value)) == describe_tensor(value)
    assert describe_tensor(value) == describe_tensor(_torch_values()[case])
    returned = ray_backend.get(ray_backend.remote(lambda: _torch_values()[case]).remote())
    assert describe_tensor(returned) == describe_tensor(value)


def test_same_ref_to_many_actors_all_see_the_value(ray_backend):
    ref = ray_backend.put(np.arange(BIG))
    holders = [ray_backend.remote(Holder).remote() for _ in range(3)]
    ray_backend.get([h.set.remote(ref) for h in holders])
    assert ray_backend.get([h.first.remote() for h in holders]) == [0, 0, 0]
    for h in holders:
        ray_backend.kill(h)
