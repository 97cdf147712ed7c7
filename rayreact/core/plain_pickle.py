"""Plain values through the stock C pickler, with numpy arrays and scalars in a compact form.

numpy's own reduction of an array or scalar pickles its dtype as an object
(``numpy.dtype('f4', False, True)`` plus a state tuple), so a 4-element
observation costs ~8 us to pickle and ~13 us to unpickle, several times the
env step that made it.  Here a numeric dtype travels as its string (``'<f4'``)::

    ndarray, small  -> (rebuild_array,  (bytes,             '<f4', shape))   in band
    ndarray, large  -> (rebuild_array,  (PickleBuffer(arr), '<f4', shape))   out of band (shared memory)
    numpy scalar    -> (rebuild_scalar, ('<i8', bytes))

Readers get what numpy's reduction gives them: arrays over the received bytes,
read-only, as in Ray.  Anything else (object, structured or sub-array dtypes,
arrays that are not C-contiguous, subclasses) keeps numpy's own reduction.
The table is private to our picklers: ``copyreg``'s global table, which user
code may rely on, is left as it is (and consulted for everything else).  The two
rebuild functions are registered as copyreg *extensions*, so a pack names them by
a 4-byte code: an unpickler finds a name through the import machinery every time,
the slowest step of decoding a small observation, but a code in a dict.
"""

from __future__ import annotations

import copyreg
import io
import pickle

IN_BAND_BYTES = 4096          # smaller arrays ride in the pickle stream: no buffer entry, no alignment padding
_SCALAR_KINDS = frozenset("biufcmM")
_ARRAY_KINDS = frozenset("biufc")     # not datetimes: numpy pickles those arrays in band (writeable, in Ray too)

_np = None
_table: dict | None = None
_table_base_len = -1
_dtypes = {}                  # dtype string -> dtype: parsing the string costs as much as the rest of a rebuild
_frombuffer = None            # numpy.frombuffer, once numpy is imported (called positionally: cheaper)


def rebuild_array(data, dtype, shape):
    dt = _dtypes.get(dtype)
    if dt is None:
        dt = _dtype(dtype)
    array = _frombuffer(data, dt)
    return array if len(shape) == 1 else array.reshape(shape)


def rebuild_scalar(dtype, data):
    dt = _dtypes.get(dtype)
    if dt is None:
        dt = _dtype(dtype)
    return _frombuffer(data, dt)[0]


def _dtype(name):
    global _frombuffer
    np = _numpy()
    _frombuffer = np.frombuffer
    dt = _dtypes[name] = np.dtype(name)
    return dt


def name_by_code(module, codes):
    """Register ``module``'s rebuild functions {name: code} as copyreg extensions (see above)."""
    for name, code in codes.items():
        try:
            copyreg.add_extension(module, name, code)
        except ValueError:    # code or name already taken (a reload): packs then name the function
            pass


name_by_code(__name__, {"rebuild_array": 0x72725201, "rebuild_scalar": 0x72725202})


def _numpy():
    global _np
    if _np is None:
        import numpy
        _np = numpy
    return _np


def _simple_dtype(dtype, kinds) -> bool:
    return dtype.kind in kinds and dtype.fields is None and dtype.subdtype is None


def _reduce_array(array):
    dtype = array.dtype
    if not (_simple_dtype(dtype, _ARRAY_KINDS) and array.flags.c_contiguous):
        return array.__reduce_ex__(5)
    if array.nbytes <= IN_BAND_BYTES:
        return rebuild_array, (array.tobytes(), dtype.str, array.shape)
    return rebuild_array, (pickle.PickleBuffer(array), dtype.str, array.shape)


def _reduce_scalar(scalar):
    dtype = scalar.dtype
    if not _simple_dtype(dtype, _SCALAR_KINDS):
        return scalar.__reduce_ex__(5)
    return rebuild_scalar, (dtype.str, scalar.tobytes())


def _dispatch_table():
    """copyreg's table plus ours; rebuilt if user code registered a reducer since."""
    global _table, _table_base_len
    if _table is None or len(copyreg.dispatch_table) != _table_base_len:
        table = dict(copyreg.dispatch_table)
        np = _numpy()
        table.setdefault(np.ndarray, _reduce_array)          # a reducer user code registered comes first
        for kind in set(np.sctypeDict.values()):
            if np.dtype(kind).kind in _SCALAR_KINDS and kind not in table:
                table[kind] = _reduce_scalar
        _table, _table_base_len = table, len(copyreg.dispatch_table)
    return _table


class _Reusable:
    """A pickler and its output buffer, reused dump after dump: building them is a third of a small dump."""

    __slots__ = ("out", "pickler", "table", "sink")

    def __init__(self):
        self.out = io.BytesIO()
        self.sink = None
        self.pickler = pickle.Pickler(self.out, protocol=5, buffer_callback=self._buffer)
        self.table = None

    def _buffer(self, pickle_buffer):
        self.sink(pickle_buffer)

    def dumps(self, value, buffer_callback):
        table = _dispatch_table()
        if table is not self.table:
            self.pickler.dispatch_table = self.table = table
        out = self.out
        self.sink = buffer_callback
        try:
            self.pickler.dump(value)
            return out.getvalue()
        finally:
            self.sink = None
            out.seek(0)
            out.truncate()
            self.pickler.clear_memo()


_idle: list = []              # picklers not in use: another thread, or a dump inside a dump, takes its own


def dumps(value, buffer_callback) -> bytes:
    """``pickle.dumps(value, protocol=5, buffer_callback=...)`` with the compact numpy forms (for values that
    hold numpy arrays or scalars: others are cheaper through ``pickle.dumps`` itself)."""
    pickler = _idle.pop() if _idle else _Reusable()
    try:
        return pickler.dumps(value, buffer_callback)
    finally:
        if len(_idle) < 4:
            _idle.append(pickler)
