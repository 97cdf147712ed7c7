# Declarations other Cython modules (reactor.pyx) share with channel.pyx.
from cpython.buffer cimport Py_buffer


cdef class _Mapped:
    """A shared file mapped into this process; keeps the mmap alive."""
    cdef object mm
    cdef Py_buffer view
    cdef char* base
    cdef bint has_view
    cdef readonly str path
