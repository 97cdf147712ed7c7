"""The wire: named fields per message kind, one serialization per value, big frames through files."""

import os
import pickle

import numpy as np
import pytest

from rayreact.core import serialization, wire
from rayreact.core.serialization import INLINE


def _frame_bytes(frame):
    return b"".join(bytes(part) for part in frame) if type(frame) is list else frame


def _inline(value):
    return (INLINE, serialization.serialize(value).inline(), [], False)


def test_fields_are_read_by_name_and_survive_the_wire():
    msg = wire.Call(b"t" * 24, "step", _inline(((1, 2), {})), [], [b"r" * 28], 1, None)
    assert msg.method == "step" and msg.num_returns == 1 and msg.KIND == wire.CALL
    back = wire.decode(_frame_bytes(wire.encode(msg)))
    assert type(back) is wire.Call
    assert back.task_id == msg.task_id and back.return_ids == msg.return_ids and back.task_name is None
    assert serialization.loads_pack(back.args[1]) == ((1, 2), {})
    assert "method='step'" in repr(back)


def test_a_message_names_its_missing_fields():
    with pytest.raises(TypeError, match=r"Done takes 3 fields \(task_id, results, ok\), got 2"):
        wire.Done(b"t", [])


def test_a_small_pack_rides_in_the_envelope():
    payload = serialization.serialize([1, 2, 3]).inline()
    assert type(payload) is bytes and payload[0] == 0x80      # a bare pack: the pickle alone
    frame = wire.encode(wire.Done(b"t", [(b"o", (INLINE, payload, [], False))], True))
    assert type(frame) is bytes


def test_a_big_pack_travels_out_of_band_and_is_never_pickled_again():
    value = np.arange(4096, dtype=np.int64)          # 32 KiB: inline, above the out-of-band threshold
    payload = serialization.serialize(value).inline()
    assert type(payload) is pickle.PickleBuffer
    frame = wire.encode(wire.Done(b"t", [(b"o", (INLINE, payload, [], False))], True))
    assert type(frame) is list
    head = frame[2]
    assert len(head) < 300, "the pack was copied into the envelope's pickle"
    raw = _frame_bytes(frame)
    back = wire.decode(raw)
    received = back.results[0][1][1]
    assert type(received) is pickle.PickleBuffer
    view = memoryview(received)
    assert view.obj is raw or view.nbytes == memoryview(payload).nbytes   # a view of the frame read, no copy
    np.testing.assert_array_equal(serialization.loads_pack(received), value)
    # Forwarded to another process, it goes out of band again.
    again = wire.encode(wire.Call(b"t", "f", (INLINE, received, [], False), [], [b"r"], 1, None))
    assert type(again) is list and len(again[2]) < 300
    np.testing.assert_array_equal(serialization.loads_pack(wire.decode(_frame_bytes(again)).args[1]), value)


def test_a_frame_past_the_limit_goes_through_a_private_file(tmp_path):
    prefix = str(tmp_path / "rr-test")
    payload = serialization.serialize(bytes(200_000)).inline()
    frame = wire.encode(wire.Reply((1, 2), (INLINE, payload, [], False)), limit=4096, prefix=prefix)
    assert type(frame) is bytes and len(frame) < 200
    (path,) = list(tmp_path.iterdir())
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    back = wire.decode(frame)
    assert type(back) is wire.Reply and back.req_id == (1, 2)
    assert serialization.loads_pack(back.payload[1]) == bytes(200_000)
    assert not list(tmp_path.iterdir()), "the reader removes the file"


def test_packs_that_share_a_frame_are_read_apart():
    big = [serialization.serialize(np.full(512, k, dtype=np.int64)).inline() for k in range(3)]
    frame = wire.encode(wire.Done(b"t", [(bytes([k]), (INLINE, p, [], False)) for k, p in enumerate(big)], True))
    raw = _frame_bytes(frame)
    back = wire.decode(raw)
    for k, (_, desc) in enumerate(back.results):
        owner = memoryview(desc[1]).obj          # what the received pack keeps alive
        assert type(owner) is bytes and len(owner) == memoryview(big[k]).nbytes < len(raw), \
            "one kept value would keep the whole frame"
        np.testing.assert_array_equal(serialization.loads_pack(desc[1]), np.full(512, k))
