# Declarations other Cython modules (reactor.pyx) share with channel.pyx.


cdef class _Mapped:
    """A shared file mapped into this process (its pages until close(), its address range until deallocation)."""
    cdef char* base
    cdef size_t length
    cdef bint detached
    cdef readonly str path


cdef void leave_awake() noexcept nogil
cdef void rejoin_awake() noexcept nogil
cdef bint crowded() noexcept nogil
