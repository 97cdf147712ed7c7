"""Which values the stock C pickler may take exactly as cloudpickle would: plain types, containers of them,
numpy arrays and scalars.  Both serialize paths ask (``serialization`` and the replay path in reactor.pyx),
each with its own plain types and depth; compiled because it runs on every call's arguments."""

try:
    import numpy as _np
    _ndarray, _npgeneric = _np.ndarray, _np.generic
except ImportError:  # pragma: no cover
    _ndarray = _npgeneric = None


cpdef int classify(value, plain_types, int max_depth, int depth=0) except -1:
    """PLAIN if the stock C pickler takes ``value`` exactly as cloudpickle would (no code: only ``plain_types``
    and containers of them, ``max_depth`` levels deep); PLAIN_NUMPY if so and numpy arrays or scalars are in
    it (plain_pickle's compact forms then); else NOT_PLAIN.  serialization.serialize asks too."""
    kind = type(value)
    if kind in plain_types:
        return PLAIN
    if kind is _ndarray:
        return NOT_PLAIN if value.dtype.hasobject else PLAIN_NUMPY
    if _npgeneric is not None and isinstance(value, _npgeneric):
        return PLAIN_NUMPY if kind.__module__ == "numpy" else NOT_PLAIN
    if depth >= max_depth or not (kind is tuple or kind is list or kind is dict) or len(value) > 64:
        return NOT_PLAIN
    if kind is dict:
        for k in value:
            if type(k) not in plain_types:
                return NOT_PLAIN
        value = value.values()
    cdef int worst = PLAIN, one
    for v in value:
        one = classify(v, plain_types, max_depth, depth + 1)
        if one == NOT_PLAIN:
            return NOT_PLAIN
        worst = max(worst, one)
    return worst
