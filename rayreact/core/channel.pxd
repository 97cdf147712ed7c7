# Declarations other Cython modules (reactor.pyx) share with channel.pyx.

from libc.stdint cimport uint32_t


cdef class _Mapped:
    """A shared file mapped into this process (its pages until close(), its address range until deallocation)."""
    cdef char* base
    cdef size_t length
    cdef bint detached
    cdef readonly str path


cdef void count_woken(uint32_t* counted) noexcept nogil
cdef void sleep_uncounted(uint32_t* counted) noexcept nogil
cdef void wake_recounted(uint32_t* counted) noexcept nogil
cdef void retire_counted(uint32_t* counted) noexcept nogil
cdef bint crowded() noexcept nogil
