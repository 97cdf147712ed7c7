"""The compact numpy codec of plain values (rayreact.core.plain_pickle): what a reader gets back, and its form."""

import copyreg
import pickle
import pickletools

import numpy as np
import pytest

from rayreact.core import plain_pickle, serialization

DTYPES = ["<i8", ">i4", "u1", "<f4", ">f8", "<c16", "?", "<M8[s]", "<m8[ms]"]


def roundtrip(value):
    """What a reader gets (through the pack, as values travel), and the codec's pickle stream."""
    data = plain_pickle.dumps(value, [].append)
    return serialization.loads_pack(memoryview(serialization.serialize(value).pack())), data


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_come_back_with_their_type_and_value(dtype):
    scalar = np.zeros(1, dtype=dtype)[0] + np.ones(1, dtype=dtype)[0] if dtype[-1] != "]" else \
        np.array([7], dtype=dtype)[0]
    back, _ = roundtrip(scalar)
    assert type(back) is type(scalar) and back.dtype == scalar.dtype and back == scalar


@pytest.mark.parametrize("dtype", [d for d in DTYPES if "M8" not in d and "m8" not in d])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (40, 40, 3)])
def test_arrays_come_back_equal_and_read_only(dtype, shape):
    array = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    back, _ = roundtrip(array)
    assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array)
    assert not back.flags.writeable


def test_a_pack_names_the_rebuild_functions_by_extension_code():
    _, data = roundtrip((np.float32(1.5), np.zeros(4)))
    assert b"rebuild" not in data and b"plain_pickle" not in data
    assert "EXT4" in {op.name for op, _, _ in pickletools.genops(data)}


class Wrapped:
    def __init__(self, inner):
        self.inner = inner


def test_a_dump_inside_a_dump_gets_a_pickler_of_its_own():
    # A user's copyreg reducer may itself pickle with the same codec, while the outer dump is still running.
    def reduce_wrapped(w):
        return pickle.loads, (plain_pickle.dumps(w.inner, None),)

    copyreg.pickle(Wrapped, reduce_wrapped)
    try:
        value = [np.int16(3), Wrapped((np.arange(3.0), np.uint8(9))), np.arange(2)]
        back, _ = roundtrip(value)
    finally:
        del copyreg.dispatch_table[Wrapped]
    assert back[0] == 3 and type(back[0]) is np.int16
    assert np.array_equal(back[1][0], np.arange(3.0)) and back[1][1] == 9
    assert np.array_equal(back[2], np.arange(2))
