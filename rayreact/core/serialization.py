"""One serialization per value: pickle-5 with out-of-band buffers, inline or in a shared segment.

A value is pickled once (cloudpickle, protocol 5).  Its large buffers (numpy
arrays, plain CPU torch tensors, PickleBuffers) are taken out of band.  The result
is *packed*::

    [header: magic, n_buffers, inband_len][(offset, length) per buffer][inband pickle][buffers, 64-aligned]

A value with no out-of-band buffers that travels inline is a *bare* pack: the in-band pickle alone
(``loads_pack`` tells the forms apart by the first byte: a pickle's 0x80, the header's magic 0x31).
Small packs travel inline inside channel messages (see core.wire: those of ``OUT_OF_BAND_MIN`` bytes
or more as PickleBuffers, out of the envelope's pickle); large ones are written once
into a shared segment file (``/dev/shm/rr-<session>-<object>``) that every
reader maps read-only.  Readers unpickle against memoryviews of the pack, so
numpy arrays come back as zero-copy, read-only views, as in Ray (torch tensors
come back as copies of their own, as in Ray: torch has no read-only tensors).

While pickling, every ObjectRef met is recorded (``contained``) so the object
table can keep nested refs alive as long as the outer value lives.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import threading
import types
from collections import ChainMap

import cloudpickle

from .. import exceptions
from . import plain_pickle, tensor_pickle
from .classify import classify as _classify
from .segments import (MIN_POOLED, PAGE, SegmentCache, map_segment, page_round, read_maps,  # noqa: F401
                       segment_pool)
from .snapshots import snapshots

MAGIC = 0x52524F31  # "RRO1"
_HEADER = struct.Struct("<IIQ")
_BUFENTRY = struct.Struct("<QQ")
ALIGN = 64

INLINE_LIMIT = 100 * 1024  # packs up to this size travel inside messages
# An inline pack this big is held as a PickleBuffer, which messages carry out of band (see core.wire): below
# it, copying the bytes into the envelope's pickle costs less than framing them apart.
OUT_OF_BAND_MIN = 512

# Descriptor kinds: how a stored value is reached.
INLINE = 0
SEGMENT = 1

_context = threading.local()


class SerializationError(TypeError):
    """A value could not be pickled; names what failed."""


def note_contained_ref(ref_id: bytes) -> None:
    """Called by ObjectRef.__reduce__: remember refs nested in the value being pickled."""
    stack = getattr(_context, "stack", None)
    if stack:
        stack[-1].append(ref_id)


def _align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


class Serialized:
    """A pickled value before it is placed: in-band bytes plus out-of-band buffers."""

    __slots__ = ("inband", "buffers", "contained", "size", "is_error")

    def __init__(self, inband, buffers, contained, is_error=False):
        self.inband = inband
        self.buffers = buffers
        self.contained = contained
        self.is_error = is_error
        size = _HEADER.size + _BUFENTRY.size * len(buffers)
        size = _align(size) + len(inband)
        for b in buffers:
            size = _align(size) + b.nbytes
        self.size = size

    def _offsets(self):
        """[(offset, length)] of the out-of-band buffers in the pack, each 64-aligned after the in-band pickle."""
        offsets = []
        pos = _align(_HEADER.size + _BUFENTRY.size * len(self.buffers)) + len(self.inband)
        for b in self.buffers:
            pos = _align(pos)
            offsets.append((pos, b.nbytes))
            pos += b.nbytes
        return offsets

    def _header(self, offsets) -> bytes:
        """The header and buffer table, zero-padded to where the in-band pickle starts."""
        header = _HEADER.pack(MAGIC, len(offsets), len(self.inband)) + b"".join(
            _BUFENTRY.pack(o, n) for o, n in offsets)
        return header + b"\0" * (_align(len(header)) - len(header))

    def head_for(self, offsets) -> bytes:
        """The start of a pack whose buffers sit at ``offsets`` [(offset, length)]: header and in-band pickle."""
        return self._header(offsets) + self.inband

    def pack(self) -> bytes:
        """The whole pack as one bytes object (for inline transport).  Without out-of-band buffers it is
        the in-band pickle alone (a *bare* pack, told apart by its first byte)."""
        if not self.buffers:
            return self.inband
        return b"".join(self.parts())     # each buffer copied once (not into a bytearray, then out of it)

    def inline(self):
        """The pack as an INLINE descriptor holds it (see :func:`inline_payload`)."""
        return inline_payload(self.pack())

    def parts(self, offsets=None) -> list:
        """The pack as the buffers it is made of, in order (a ring writes them as one frame, unjoined; a
        segment is written from them).  The buffers are the value's own memory: write them before
        anything can change it."""
        if offsets is None:
            offsets = self._offsets()
        header = self._header(offsets)
        parts = [header, self.inband]
        pos = len(header) + len(self.inband)
        for (o, n), b in zip(offsets, self.buffers):
            if o > pos:
                parts.append(b"\0" * (o - pos))
            parts.append(b.cast("B") if b.ndim != 1 or b.format != "B" else b)
            pos = o + n
        return parts

    def write_segment(self, path: str) -> None:
        """Write the pack into a segment file (mode 0600) at ``path``.

        A pack identical to one this process wrote before becomes a new name of that
        file (``snapshots``).  Otherwise a recycled file from the session's pool is
        preferred: its pages already exist (often still mapped here), so writing is a
        plain memory copy instead of allocate-zero-copy.
        """
        if snapshots.link_if_same(self, path):
            return
        offsets = self._offsets()
        parts = self.parts(offsets)
        w = segment_pool.take(path, self.size)
        if w is None and snapshots.surrender(self.size):
            w = segment_pool.take(path, self.size)
        watches = snapshots.watch_before_write(self)
        try:
            if w is not None:
                dst = memoryview(w.mm)
                try:
                    at = 0
                    for part in parts:
                        _copy(dst[at:at + len(part)], part)
                        at += len(part)
                finally:
                    del dst
            else:
                self._write_fresh(path, parts)
        except BaseException:
            snapshots.let_go(watches)
            raise
        snapshots.remember(self, path, offsets, w.mm if w is not None else None, watches)
        if w is not None:
            segment_pool.written(w)

    def _write_fresh(self, path, parts):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, parts)
            if self.size >= MIN_POOLED and self.size % PAGE:
                # Whole pages: values of similar sizes then reuse the file as it is once it is pooled.
                os.ftruncate(fd, page_round(self.size))
        finally:
            os.close(fd)


_PARALLEL_COPY_BYTES = 16 * 1024 * 1024


def _copy(dst: memoryview, src: memoryview):
    """dst[:] = src; big copies are split over two threads (numpy copies without the GIL)."""
    n = len(src)
    if n < _PARALLEL_COPY_BYTES or (os.cpu_count() or 1) < 2:
        dst[:] = src
        return
    try:
        import numpy as np
    except ImportError:
        dst[:] = src
        return
    d = np.frombuffer(dst, dtype=np.uint8)
    s = np.frombuffer(src, dtype=np.uint8)
    half = (n // 2) & ~4095
    helper = threading.Thread(target=np.copyto, args=(d[half:], s[half:]))
    helper.start()
    np.copyto(d[:half], s[:half])
    helper.join()


def _write_all(fd, parts):
    # writev in bounded batches; loop on short writes.
    pending = [memoryview(p) for p in parts if len(p)]
    while pending:
        batch = pending[:512]
        written = os.writev(fd, batch)
        while written and pending:
            head = pending[0]
            if written >= len(head):
                written -= len(head)
                pending.pop(0)
            else:
                pending[0] = head[written:]
                written = 0


_SIMPLE_TYPES = {int, float, str, bytes, bool, type(None), complex}
_REF_FREE_TYPES = set(_SIMPLE_TYPES)      # of those, the ones whose pickling notes no nested ref


def register_simple_type(t, notes_refs=False):
    """Types whose instances the C pickler handles exactly as cloudpickle would (importable by reference).
    ``notes_refs``: pickling one records a nested ref (``note_contained_ref``), so it needs ``serialize``."""
    _SIMPLE_TYPES.add(t)
    if not notes_refs:
        _REF_FREE_TYPES.add(t)


NOT_SIMPLE, SIMPLE, SIMPLE_NUMPY = 0, 1, 2       # classify's NOT_PLAIN, PLAIN, PLAIN_NUMPY


def _simplicity(value):
    """SIMPLE: the C pickler handles ``value`` exactly as cloudpickle would; SIMPLE_NUMPY: so, and numpy is in it."""
    return _classify(value, _SIMPLE_TYPES, 3)


def _reduce_code_keeping_its_file(code):
    """cloudpickle's reduction of a code object, with the real file name: cloudpickle (3.1.3) writes
    ``<dynamic-code>`` there, so a worker's traceback and warnings could not show the user's file,
    line and source (Ray's vendored copy keeps the name)."""
    rebuild, args = _cloudpickle_code_reduce(code)
    at = args.index("<dynamic-code>") if "<dynamic-code>" in args else -1
    if at < 0:
        return rebuild, args
    return rebuild, args[:at] + (code.co_filename,) + args[at + 1:]


_cloudpickle_code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, keeping code objects' file names, with plain CPU torch tensors out of band
    (``tensor_pickle``) once torch is imported."""

    dispatch_table = ChainMap({types.CodeType: _reduce_code_keeping_its_file}, cloudpickle.Pickler.dispatch_table)
    _with_torch = False

    @classmethod
    def prepared(cls):
        if not cls._with_torch and "torch" in sys.modules:
            found = tensor_pickle.reducers()
            if found:
                cls.dispatch_table.maps[0].update(found)
                cls._with_torch = True
        return cls


def _cloudpickle_dumps(value, buffer_callback):
    out = io.BytesIO()
    _Pickler.prepared()(out, protocol=5, buffer_callback=buffer_callback).dump(value)
    return out.getvalue()


def serialize(value, *, is_error=False) -> Serialized:
    """Pickle ``value`` once; big buffers stay out of band (zero copies so far)."""
    stack = getattr(_context, "stack", None)
    if stack is None:
        stack = _context.stack = []
    stack.append([])
    try:
        simplicity = _simplicity(value)
        inband = None
        if simplicity != NOT_SIMPLE:
            try:
                inband, raws = pickle_plain(value, simplicity)
            except Exception:  # noqa: BLE001 - cloudpickle below says what, if anything, cannot be pickled
                # A serializer registered for a plain type (ray.util.register_serializer) that pickles a
                # function defined in the script: only cloudpickle can send that by value.
                inband = None
        if inband is None:
            buffers = []
            inband = _cloudpickle_dumps(value, buffers.append)
            raws = _raw_buffers(buffers)
    except Exception as exc:
        raise SerializationError(_describe_unpicklable(value, exc)) from exc
    finally:
        contained = stack.pop()
    return Serialized(inband, raws, contained, is_error)


def inline_plain(value):
    """For a value made of simple types alone (no refs, no buffers): its INLINE payload, or, past
    INLINE_LIMIT, its ``Serialized`` (for a segment); None for any other value.  The common small argument
    or result skips the general path."""
    if _classify(value, _REF_FREE_TYPES, 3) != SIMPLE:
        return None
    pack = pickle.dumps(value, protocol=5)
    if len(pack) > INLINE_LIMIT:
        return Serialized(pack, [], [])
    return inline_payload(pack)


def pickle_plain(value, simplicity):
    """(in-band bytes, raw buffers) of a value ``_simplicity`` (or reactor.classify) found plain: the C
    pickler, several times cheaper than cloudpickle's hooks, with numpy's compact forms if numpy is in it."""
    buffers = []
    if simplicity == SIMPLE:
        inband = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    else:
        inband = plain_pickle.dumps(value, buffers.append)
    return inband, _raw_buffers(buffers) if buffers else []


def _raw_buffers(buffers):
    raws = []
    for pb in buffers:
        try:
            raws.append(pb.raw())
        except BufferError:
            # Non-contiguous buffer: fall back to an in-band copy of this one.
            raws.append(memoryview(bytes(pb)))
    return raws


def _describe_unpicklable(value, exc) -> str:
    culprit = _find_unpicklable(value, depth=0)
    where = f" (the unpicklable part is {culprit})" if culprit else ""
    return f"Could not serialize {type(value).__name__} value{where}: {type(exc).__name__}: {exc}"


def _find_unpicklable(value, depth):
    if depth > 3:
        return None
    items = []
    if isinstance(value, dict):
        items = [(f"[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple, set)):
        items = [(f"[{i}]", v) for i, v in enumerate(value)]
    elif hasattr(value, "__dict__"):
        items = [(f".{k}", v) for k, v in vars(value).items()]
    for label, item in items:
        try:
            cloudpickle.dumps(item)
        except Exception:
            deeper = _find_unpicklable(item, depth + 1)
            return deeper and (label + deeper.split(" ", 1)[0] + " " + deeper.split(" ", 1)[1]) or \
                f"{label} of type {type(item).__name__}"
    return None


def inline_payload(pack):
    """An INLINE descriptor's payload: the pack, as a PickleBuffer once it is big enough to travel out of
    band (``OUT_OF_BAND_MIN``)."""
    return pickle.PickleBuffer(pack) if len(pack) >= OUT_OF_BAND_MIN else pack


def payload_size(payload) -> int:
    """Bytes in an INLINE payload (bytes, a PickleBuffer or a view)."""
    return len(payload) if type(payload) is bytes else memoryview(payload).nbytes


_BARE = 0x80        # a bare pack is a pickle (protocol 5 starts with 0x80); a full pack starts with MAGIC


def loads_pack(buf):
    """Unpickle a pack held in ``buf`` (bytes, a PickleBuffer, or a read-only mmap view) without copying
    buffers."""
    if type(buf) is bytes:
        if buf[0] == _BARE:
            return pickle.loads(buf)
    else:
        buf = memoryview(buf)
        if buf[0] == _BARE:
            return pickle.loads(buf)
    magic, nbuf, inband_len = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise exceptions.RaySystemError("corrupt object pack (bad magic)")
    entries = [_BUFENTRY.unpack_from(buf, _HEADER.size + i * _BUFENTRY.size) for i in range(nbuf)]
    inband_at = _align(_HEADER.size + _BUFENTRY.size * nbuf)
    view = memoryview(buf)
    if not view.readonly:
        view = view.toreadonly()
    buffers = [view[o:o + n] for o, n in entries]
    return pickle.loads(view[inband_at:inband_at + inband_len], buffers=buffers)


def dumps_code(obj) -> bytes:
    """Functions and classes are shipped once per worker, pickled by value where needed."""
    try:
        out = io.BytesIO()
        _Pickler(out, protocol=5).dump(obj)
        return out.getvalue()
    except Exception as exc:
        raise SerializationError(f"Could not serialize {getattr(obj, '__qualname__', obj)!r}: "
                                 f"{type(exc).__name__}: {exc}") from exc
