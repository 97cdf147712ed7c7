"""Plain CPU torch tensors out of band: their bytes go to shared memory once, not into the pickle.

torch's own reduction writes a tensor's storage into the pickle stream itself: a
10 MB tensor is copied into the in-band bytes, then again into the segment, and the
snapshot cache (which works on out-of-band buffers) never sees it.  Here a plain
tensor travels as ``(rebuild_tensor, (PickleBuffer(its bytes), dtype, shape))``.

"Plain" keeps every observable of torch's reduction: an exact ``torch.Tensor`` on the
CPU, dense, contiguous, no grad, no conjugate/negative bit, no attributes of its own,
and covering its whole storage from offset 0 (a view would otherwise arrive with a
smaller storage than torch's reduction gives it).  Anything else keeps torch's way.

A reader gets a writable tensor of its own, as from Ray (which copies by default):
torch has no read-only tensors, and a write into a read-only mapping would kill the
process.
"""

from __future__ import annotations

import copyreg
import pickle
import sys

from . import plain_pickle


def rebuild_tensor(data, dtype, shape):
    import numpy
    import torch
    # Reshaped by torch, not numpy: torch's own strides, also for empty tensors.
    return torch.from_numpy(numpy.frombuffer(data, dtype=dtype).copy()).reshape(shape)


plain_pickle.name_by_code(__name__, {"rebuild_tensor": 0x72725203})


def _reduce_tensor(tensor):
    if (tensor.device.type == "cpu" and tensor.layout is _torch().strided and not tensor.requires_grad
            and tensor.is_contiguous() and tensor.storage_offset() == 0 and not tensor.is_conj()
            and not tensor.is_neg() and not tensor.__dict__
            and tensor.untyped_storage().nbytes() == tensor.element_size() * tensor.numel()):
        try:
            array = tensor.numpy()
        except (TypeError, RuntimeError):      # bfloat16 and friends have no numpy dtype
            return tensor.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        return rebuild_tensor, (pickle.PickleBuffer(array), array.dtype.str, tuple(tensor.shape))
    return tensor.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


def _torch():
    return sys.modules["torch"]


def reducers() -> dict:
    """{type: reducer} to add to a pickler's dispatch table: empty until the process has imported torch."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "Tensor") or torch.Tensor in copyreg.dispatch_table:
        return {}                              # (a reducer user code registered comes first)
    return {torch.Tensor: _reduce_tensor}
