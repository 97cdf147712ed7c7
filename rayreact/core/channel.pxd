# Declarations other Cython modules (reactor.pyx) share with channel.pyx.


cdef class _Mapped:
    """A shared file mapped into this process (the mapping lives until close() or deallocation)."""
    cdef char* base
    cdef size_t length
    cdef readonly str path
