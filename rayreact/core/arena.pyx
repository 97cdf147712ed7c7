# cython: language_level=3
"""Large numpy buffers born in segment files: a NEP 49 data allocator for workers.

A worker's result is written once into a segment the driver maps.  When the
result is a large array the call just made (``np.array(x)``, a frame, a batch),
that write is a second full copy of bytes that already exist.  Here numpy's data
allocator gives large allocations pages of a segment file instead (a *slot*), so
the array is born where its result pack will live; returning it writes only the
pack's header into the slot's first page, and the file changes hands by
``rename`` (see ``core.handoff``, which owns the files and the policy).

Slot states (``Slot.state``)::

    EMPTY ──add_slot──► FREE ──malloc──► IN_USE ──free──► FREE
                                           │
                                         claim (a result names this buffer)
                                           ▼
                                        CLAIMED ──free──► CLAIMED_DEAD
                                           │                  │
                        settle: still alive│                  │settle: nobody else held it
                           (back to IN_USE, │                  │(the file is handed over:
                            result copied)  ▼                  ▼ the slot is EMPTY again)

Only numpy's data allocations of at least ``min_bytes`` look at the slots; the
rest, and every allocation when no slot fits, go to numpy's own handler.  The
handler is a context variable in numpy: it is installed for the thread that
calls ``install`` (a worker's main thread), which is the thread that runs calls.
"""

from libc.stdint cimport uint8_t, uintptr_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, strncpy
from posix.mman cimport mmap, MAP_FIXED, MAP_PRIVATE, MAP_ANONYMOUS, PROT_READ, PROT_WRITE, MAP_FAILED
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock,
                               PyThread_release_lock, WAIT_LOCK)

cdef extern from "numpy/arrayobject.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void* (*malloc) (void *ctx, size_t size) noexcept nogil
        void* (*calloc) (void *ctx, size_t nelem, size_t elsize) noexcept nogil
        void* (*realloc) (void *ctx, void *ptr, size_t new_size) noexcept nogil
        void (*free) (void *ctx, void *ptr, size_t size) noexcept nogil
    ctypedef struct PyDataMem_Handler:
        char name[127]
        uint8_t version
        PyDataMemAllocator allocator
    object PyDataMem_SetHandler(object handler)
    object PyDataMem_GetHandler()
    int _import_array() except -1

DEF MAX_SLOTS = 8
RESERVE = 4096                  # bytes before a slot's data: the result pack's header and in-band pickle
cdef size_t C_RESERVE = 4096

cdef enum:
    S_EMPTY = 0
    S_FREE = 1
    S_IN_USE = 2
    S_CLAIMED = 3
    S_CLAIMED_DEAD = 4

cdef struct Slot:
    char* base              # the mapping (RESERVE bytes of header room, then the data)
    size_t capacity         # data bytes
    size_t used             # bytes the current allocation asked for
    int state

cdef Slot slots[MAX_SLOTS]
cdef int busy = 0            # slots IN_USE or CLAIMED: free() looks at the table only while this is > 0
cdef size_t min_bytes = 1 << 20
cdef size_t last_miss = 0    # the size of the last large allocation no slot fitted
cdef PyThread_type_lock lock = NULL
cdef PyDataMem_Handler ours
cdef PyDataMem_Handler* theirs = NULL
cdef object their_capsule = None
cdef object our_capsule = None


cdef inline char* data_of(int i) noexcept nogil:
    return slots[i].base + C_RESERVE


cdef void* arena_malloc(void* ctx, size_t size) noexcept nogil:
    cdef int i, best = -1
    global busy, last_miss
    if size >= min_bytes:
        PyThread_acquire_lock(lock, WAIT_LOCK)
        for i in range(MAX_SLOTS):
            if slots[i].state == S_FREE and size <= slots[i].capacity <= size + size // 2:
                if best < 0 or slots[i].capacity < slots[best].capacity:
                    best = i
        if best >= 0:
            slots[best].state = S_IN_USE
            slots[best].used = size
            busy += 1
        else:
            last_miss = size
        PyThread_release_lock(lock)
        if best >= 0:
            return data_of(best)
    return theirs.allocator.malloc(theirs.allocator.ctx, size)


cdef int slot_of(void* ptr) noexcept nogil:
    cdef int i
    for i in range(MAX_SLOTS):
        if (slots[i].state == S_IN_USE or slots[i].state == S_CLAIMED) and data_of(i) == <char*>ptr:
            return i
    return -1


cdef void arena_free(void* ctx, void* ptr, size_t size) noexcept nogil:
    cdef int i
    global busy
    if busy > 0 and ptr != NULL:
        PyThread_acquire_lock(lock, WAIT_LOCK)
        i = slot_of(ptr)
        if i >= 0:
            slots[i].state = S_FREE if slots[i].state == S_IN_USE else S_CLAIMED_DEAD
            busy -= 1
        PyThread_release_lock(lock)
        if i >= 0:
            return
    theirs.allocator.free(theirs.allocator.ctx, ptr, size)


cdef void* arena_calloc(void* ctx, size_t nelem, size_t elsize) noexcept nogil:
    # Zeroed memory: fresh pages from the system are already zero; a recycled slot is not.
    return theirs.allocator.calloc(theirs.allocator.ctx, nelem, elsize)


cdef void* arena_realloc(void* ctx, void* ptr, size_t new_size) noexcept nogil:
    cdef int i = -1
    cdef size_t used = 0
    cdef void* moved
    if busy > 0 and ptr != NULL:
        PyThread_acquire_lock(lock, WAIT_LOCK)
        i = slot_of(ptr)
        if i >= 0:
            used = slots[i].used
        PyThread_release_lock(lock)
    if i < 0:
        return theirs.allocator.realloc(theirs.allocator.ctx, ptr, new_size)
    moved = theirs.allocator.malloc(theirs.allocator.ctx, new_size)
    if moved != NULL:
        memcpy(moved, ptr, used if used < new_size else new_size)
        arena_free(ctx, ptr, used)
    return moved


def install(size_t threshold=1 << 20):
    """Make this thread's numpy allocate large buffers from slots (once per process)."""
    global lock, theirs, their_capsule, our_capsule, min_bytes
    min_bytes = threshold
    if our_capsule is not None:
        PyDataMem_SetHandler(our_capsule)
        return
    _import_array()
    lock = PyThread_allocate_lock()
    their_capsule = PyDataMem_GetHandler()
    theirs = <PyDataMem_Handler*>PyCapsule_GetPointer(their_capsule, "mem_handler")
    strncpy(ours.name, b"rayreact_arena", 127)
    ours.version = 1
    ours.allocator.ctx = NULL
    ours.allocator.malloc = arena_malloc
    ours.allocator.calloc = arena_calloc
    ours.allocator.realloc = arena_realloc
    ours.allocator.free = arena_free
    our_capsule = PyCapsule_New(&ours, "mem_handler", NULL)
    PyDataMem_SetHandler(our_capsule)


def add_slot(uintptr_t base, size_t capacity):
    """A mapping of ``RESERVE + capacity`` bytes at ``base`` becomes a FREE slot: its index, or -1 if full."""
    cdef int i, found = -1
    PyThread_acquire_lock(lock, WAIT_LOCK)
    for i in range(MAX_SLOTS):
        if slots[i].state == S_EMPTY:
            slots[i].base = <char*>base
            slots[i].capacity = capacity
            slots[i].used = 0
            slots[i].state = S_FREE
            found = i
            break
    PyThread_release_lock(lock)
    return found


def claim(uintptr_t address, size_t nbytes):
    """A result's buffer [address, address + nbytes): the index of the IN_USE slot holding it (now CLAIMED), or -1."""
    cdef int i, found = -1
    cdef char* p = <char*>address
    global busy
    if busy == 0:
        return -1
    PyThread_acquire_lock(lock, WAIT_LOCK)
    for i in range(MAX_SLOTS):
        if slots[i].state == S_IN_USE and data_of(i) <= p and p + nbytes <= data_of(i) + slots[i].capacity:
            slots[i].state = S_CLAIMED
            found = i
            break
    PyThread_release_lock(lock)
    return found


def settle(int i):
    """After the caller dropped its references: True if the claimed buffer died (the slot is EMPTY, its file
    is the caller's to hand over), False if something still holds it (IN_USE again)."""
    cdef bint dead
    PyThread_acquire_lock(lock, WAIT_LOCK)
    dead = slots[i].state == S_CLAIMED_DEAD
    slots[i].state = S_EMPTY if dead else S_IN_USE
    PyThread_release_lock(lock)
    return dead


def free_capacities():
    """{index: capacity} of FREE slots."""
    out = {}
    PyThread_acquire_lock(lock, WAIT_LOCK)
    for i in range(MAX_SLOTS):
        if slots[i].state == S_FREE:
            out[i] = slots[i].capacity
    PyThread_release_lock(lock)
    return out


def drop(int i):
    """Take a FREE slot out of the table (True), so its mapping may go; False if it is in use."""
    cdef bint ok
    PyThread_acquire_lock(lock, WAIT_LOCK)
    ok = slots[i].state == S_FREE
    if ok:
        slots[i].state = S_EMPTY
    PyThread_release_lock(lock)
    return ok


def take_miss():
    """The size of the last large allocation no slot fitted (0 if none since the last call)."""
    global last_miss
    cdef size_t size
    PyThread_acquire_lock(lock, WAIT_LOCK)
    size = last_miss
    last_miss = 0
    PyThread_release_lock(lock)
    return size


def forget_all():
    """In a child forked by user code: the slots' files are the parent's.  Free slots are forgotten; arrays
    the child inherited get private copies of their bytes at the same addresses, so that, as after any
    fork, neither side sees the other's later writes."""
    cdef int i
    cdef size_t size
    cdef void* saved
    cdef void* got
    for i in range(MAX_SLOTS):
        if slots[i].state == S_FREE:
            slots[i].state = S_EMPTY
        elif slots[i].state == S_IN_USE or slots[i].state == S_CLAIMED:
            size = C_RESERVE + slots[i].capacity
            saved = malloc(size)
            if saved == NULL:
                continue        # out of memory in the child: it keeps the shared pages
            memcpy(saved, slots[i].base, size)
            got = mmap(slots[i].base, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
            if got != MAP_FAILED:
                memcpy(slots[i].base, saved, size)
            free(saved)
            # Still in the table: numpy frees these arrays through it (their pages are now the child's own).


def data_address(int i):
    return <uintptr_t>data_of(i)
