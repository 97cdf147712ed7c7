# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Shared-memory channels: single-producer/single-consumer byte rings and doorbells.

A process that consumes messages owns one *doorbell* and reads any number of
*rings*; each ring has exactly one writer process and one reader process::

      producer A ──frames──▶ [ring A→C] ─┐
      producer B ──frames──▶ [ring B→C] ─┼─▶ consumer C polls its rings,
      zygote     ──frames──▶ [ring Z→C] ─┘   sleeps on C's doorbell when all are empty
                     │                  ▲
                     └──── ring(C) ─────┘   (a futex wake, only if C sleeps)

A frame is ``[u32 length][payload]`` padded to 8 bytes; the writer publishes it
by advancing ``tail`` after copying, so a writer killed mid-frame leaves nothing
visible.  Waiting is spin-then-block: a short spin with the GIL released (the
reply to an actor call usually arrives within microseconds), then a futex wait
with a timeout so callers can check peer liveness.  Nothing here ever spins
unboundedly.  A reader that can do nothing with a ring's frames until another
ring's come (a replayed reaction waiting for its inputs) marks it *stalled*: a
writer that asks (``wake_wanted``) then skips the doorbell, the reader's waits
ignore the ring, and its frames wait for the reader's next look.

The doorbell has two wake targets.  A thread that is actively waiting for
results (``get``/``wait`` in the driver, the main loop of a worker) registers as
*active*; while any is active, producers wake the active word.  Otherwise they
wake the *background* word, where the driver's service thread sleeps.  This
keeps the service thread asleep while the main thread pumps messages itself,
which saves a thread switch on every call.

How long to spin depends on whether a core is free.  The driver's doorbell page
holds one more word, *awake*: how many of the session's processes are not asleep
on their doorbell (each worker adds itself when it starts, takes itself off while
it sleeps, and the driver takes off a worker that died awake; the driver asleep
in a replayed get is off it too).  A producer that wakes a sleeper counts it
awake at once, since it wants a core from then on, not from when it first runs
(the *wake counted* word, so that it is counted once).  While at most one
process per core is awake, a waiter spins long (the reply is coming from a
process that has a core to itself); once more are awake, it spins only briefly,
since spinning would take the core from a process doing real work.
"""

from libc.stdint cimport uint32_t, uint64_t, int64_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.errno cimport errno
from cpython.buffer cimport Py_buffer, PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from posix.mman cimport (mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED,
                         MAP_FAILED)
from cpython.mem cimport PyMem_Malloc, PyMem_Free

import os as _os

cdef extern from "sys/mman.h" nogil:
    int MAP_NORESERVE

cdef extern from "channel_sync.h" nogil:
    uint64_t load_u64(uint64_t* p)
    void store_u64(uint64_t* p, uint64_t v)
    uint32_t load_u32(uint32_t* p)
    void store_u32(uint32_t* p, uint32_t v)
    uint32_t add_u32(uint32_t* p, uint32_t v)
    uint32_t sub_u32(uint32_t* p, uint32_t v)
    uint32_t xchg_u32(uint32_t* p, uint32_t v)
    void full_fence()
    void cpu_relax()
    int futex_wait(uint32_t* addr, uint32_t expected, double timeout_s)
    int futex_wake_all(uint32_t* addr)
    double monotonic_s()

IMPLEMENTATION = "cython"

# Ring header layout: each hot field on its own cache line.
DEF OFF_HEAD = 0            # u64, advanced by the reader
DEF OFF_TAIL = 64           # u64, advanced by the writer
DEF OFF_CAP = 128           # u64 capacity in bytes (power of two)
DEF OFF_SPACE_SEQ = 192     # u32 futex word: bumped by the reader after it frees space
DEF OFF_WRITER_WAITS = 196  # u32: the writer sleeps on SPACE_SEQ
DEF OFF_CLOSED = 256        # u32: set when either side declares the ring dead
DEF OFF_READER_STALLED = 320  # u32: the reader waits for frames of other rings; a writer may skip its ring
DEF HEADER = 512

# Doorbell layout.
DEF DB_SEQ = 0
DEF DB_SLEEPERS = 4
DEF DB_ACTIVE = 8
DEF DB_WAKE_COUNTED = 12    # u32: a ring counted the sleeper it woke awake (see count_woken)
DEF DB_AWAKE = 96           # u32, in the driver's doorbell only: the session's processes not asleep
DEF DB_STORE_USED = 104     # u64, in the driver's doorbell only: bytes of objects in shared memory (driver writes)
DEF DB_INTERRUPTS = 112     # u32, in a worker's doorbell: SIGINTs its task code has taken (cancel)
DEF DB_CANCEL_AT = 120      # u64, in a worker's doorbell: 1 + the replayed invocation ray.cancel stops (0: none)
DEF DB_BG_SEQ = 64
DEF DB_BG_SLEEPERS = 68
DEF DB_CANCEL_TASK = 80    # u64, in a worker's doorbell: the tag (ids.tag64) of the dynamic task a SIGINT is for
DEF DB_SIZE = 128

cdef double SPIN_SECONDS = 50e-6
cdef double SPIN_CROWDED_SECONDS = 3e-6
DEF PROBE_EVERY = 8
cdef uint32_t* AWAKE = NULL          # the session's awake counter (see the module docstring)
cdef object AWAKE_PAGE = None        # the Doorbell that maps it, kept alive
cdef uint32_t CORES = max(1, len(_os.sched_getaffinity(0)))


def set_spin_seconds(double seconds):
    """How long a waiter spins before it blocks while cores are free (0 disables spinning)."""
    global SPIN_SECONDS
    SPIN_SECONDS = seconds


def count_awake_on(Doorbell driver_bell, bint join):
    """Count this process' waits in the session's awake counter; ``join`` adds this process to it."""
    global AWAKE, AWAKE_PAGE
    AWAKE_PAGE = driver_bell
    AWAKE = <uint32_t*>(driver_bell.mapped.base + DB_AWAKE)
    if join:
        add_u32(AWAKE, 1)


def publish_store_used(Doorbell driver_bell, uint64_t used):
    """The driver tells every process how full the object store is (they spill to disk past the limit)."""
    store_u64(<uint64_t*>(driver_bell.mapped.base + DB_STORE_USED), used)


def store_used_published():
    """Bytes of objects in shared memory, as the driver last published (0 when this process is not attached)."""
    if AWAKE_PAGE is None:
        return 0
    cdef Doorbell page = AWAKE_PAGE
    return load_u64(<uint64_t*>(page.mapped.base + DB_STORE_USED))


def stop_counting_awake():
    global AWAKE, AWAKE_PAGE
    AWAKE = NULL
    AWAKE_PAGE = None


def awake_processes():
    """The session's awake counter (0 when this process does not count)."""
    return load_u32(AWAKE) if AWAKE != NULL else 0


def count_awake_thread():
    """Another thread of this process that waits on a doorbell of its own joins the awake counter."""
    if AWAKE != NULL:
        add_u32(AWAKE, 1)


def spin_now():
    """How long a waiter in this process would spin right now (see the module docstring)."""
    return spin_budget()


# The wake-counted protocol: beside each futex word a counted waiter sleeps on lies a *wake counted* word.
# The waker counts the sleeper awake at the wake (it wants a core from then on, not from when it first
# runs) and sets the word; the sleeper, awake again, then does not count itself.  A count a waker made
# after the sleeper had woken anyway is taken off at its next sleep, or when it is gone.
cdef void count_woken(uint32_t* counted) noexcept nogil:
    """(A waker) the sleeper behind ``counted`` wants a core from now on: count it awake, once."""
    if AWAKE != NULL and xchg_u32(counted, 1) == 0:
        add_u32(AWAKE, 1)


cdef void sleep_uncounted(uint32_t* counted) noexcept nogil:
    """(A waiter) it goes to sleep: off the count, and so is a count a waker made after it last woke."""
    if AWAKE != NULL:
        sub_u32(AWAKE, 1)
        if xchg_u32(counted, 0) == 1:
            sub_u32(AWAKE, 1)


cdef void wake_recounted(uint32_t* counted) noexcept nogil:
    """(A waiter) it woke: back on the count, unless the waker that woke it counted it."""
    if AWAKE != NULL and xchg_u32(counted, 0) == 0:
        add_u32(AWAKE, 1)


cdef void retire_counted(uint32_t* counted) noexcept nogil:
    """The waiter is gone: a count a waker made for it comes off, and no later waker counts it."""
    if AWAKE != NULL and xchg_u32(counted, 1) == 1:
        sub_u32(AWAKE, 1)


cdef bint crowded() noexcept nogil:
    """More of the session's processes are awake than there are cores."""
    return AWAKE != NULL and load_u32(AWAKE) > CORES


cdef inline double spin_budget() nogil:
    if crowded() and SPIN_SECONDS > SPIN_CROWDED_SECONDS:
        return SPIN_CROWDED_SECONDS
    return SPIN_SECONDS


class ChannelClosed(Exception):
    """The peer declared this ring dead."""


def ring_file_size(uint64_t capacity):
    return HEADER + capacity


cdef class _Mapped:
    # Attributes are declared in channel.pxd (reactor.pyx maps its futex page with it too).
    # Mapped with mmap(2) directly: Python's mmap keeps a duplicate descriptor per mapping, which cost
    # the driver three descriptors per worker and ran out of them near 340 actors at `ulimit -n 1024`.

    def __cinit__(self, str path, Py_ssize_t size, bint create):
        self.base = NULL
        self.length = 0
        self.path = path
        flags = _os.O_RDWR | _os.O_NOFOLLOW | _os.O_CLOEXEC | (_os.O_CREAT | _os.O_EXCL if create else 0)
        fd = _os.open(path, flags, 0o600)
        cdef void* addr
        try:
            if create:
                _os.ftruncate(fd, size)
            elif _os.fstat(fd).st_size < size:
                raise ValueError(f"{path} is smaller than the {size} bytes a channel maps")
            addr = mmap(NULL, <size_t>size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            if addr == MAP_FAILED:
                raise OSError(errno, _os.strerror(errno), path)
        finally:
            _os.close(fd)
        self.base = <char*>addr
        self.length = <size_t>size

    def close(self):
        """Give the shared pages back now.  The address range stays mapped, to private zero pages, until
        deallocation: a thread still holding the ring or doorbell (a late reader, a writer giving up) then
        reads zeros and writes nowhere instead of faulting on an unmapped page and killing the process."""
        if self.base != NULL and not self.detached:
            # MAP_NORESERVE: the zero pages are touched at most once or twice; they cost no commit charge.
            if mmap(self.base, self.length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED:
                munmap(self.base, self.length)       # the range may be half gone: give it all back, as before
                self.base = NULL
            self.detached = True

    def __dealloc__(self):
        if self.base != NULL:
            munmap(self.base, self.length)


cdef class Doorbell:
    """The futex words a consumer process sleeps on (see the module docstring)."""
    cdef _Mapped mapped
    cdef uint32_t* seq
    cdef uint32_t* sleepers
    cdef uint32_t* active
    cdef uint32_t* wake_counted
    cdef uint32_t* bg_seq
    cdef uint32_t* bg_sleepers

    def __cinit__(self, str path, bint create=False):
        self.mapped = _Mapped(path, DB_SIZE, create)
        cdef char* b = self.mapped.base
        self.seq = <uint32_t*>(b + DB_SEQ)
        self.sleepers = <uint32_t*>(b + DB_SLEEPERS)
        self.active = <uint32_t*>(b + DB_ACTIVE)
        self.wake_counted = <uint32_t*>(b + DB_WAKE_COUNTED)
        self.bg_seq = <uint32_t*>(b + DB_BG_SEQ)
        self.bg_sleepers = <uint32_t*>(b + DB_BG_SLEEPERS)

    @property
    def path(self):
        return self.mapped.path

    cdef inline void _ring(self) nogil:
        full_fence()
        if load_u32(self.active) > 0:
            add_u32(self.seq, 1)
            if load_u32(self.sleepers) > 0:
                count_woken(self.wake_counted)
                futex_wake_all(self.seq)
        else:
            add_u32(self.bg_seq, 1)
            if load_u32(self.bg_sleepers) > 0:
                futex_wake_all(self.bg_seq)

    def ring(self):
        """Wake whoever waits on this doorbell (cheap when nobody sleeps)."""
        self._ring()

    def sequence(self):
        """The active word's count of rings: read it before checking for work, pass it to ``Poller.wait``,
        and a ring in between is never slept through."""
        full_fence()
        return load_u32(self.seq)

    def note_interrupt(self):
        """A worker's task took a SIGINT (the driver stops re-sending it)."""
        add_u32(<uint32_t*>(self.mapped.base + DB_INTERRUPTS), 1)

    def interrupts(self):
        return load_u32(<uint32_t*>(self.mapped.base + DB_INTERRUPTS))

    def cancel_invocation(self, int64_t index):
        """(Driver) a lent worker's replayed invocation ``index`` is cancelled: it is skipped or interrupted."""
        store_u64(<uint64_t*>(self.mapped.base + DB_CANCEL_AT), <uint64_t>(index + 1))

    def cancelled_invocation(self):
        """The invocation ``cancel_invocation`` named last (-1: none)."""
        return <int64_t>load_u64(<uint64_t*>(self.mapped.base + DB_CANCEL_AT)) - 1

    def cancel_task(self, uint64_t tag):
        """(Driver) the SIGINTs that follow are for the dynamic task tagged ``tag`` only: a worker running
        another one (the next task of its pipeline, say) ignores them."""
        store_u64(<uint64_t*>(self.mapped.base + DB_CANCEL_TASK), tag)

    def cancelled_task(self):
        """The tag ``cancel_task`` named last (0: none)."""
        return load_u64(<uint64_t*>(self.mapped.base + DB_CANCEL_TASK))

    def retire_waiter(self):
        """The process or thread that waits on this doorbell is gone: off the awake count if it was awake
        (a process that died awake), and so is a count a ring made for it as it slept; no later ring counts
        it."""
        if AWAKE != NULL and load_u32(self.sleepers) == 0:
            sub_u32(AWAKE, 1)
        retire_counted(self.wake_counted)

    def asleep(self):
        """Whether a thread of the owning process sleeps on the active word now."""
        return load_u32(self.sleepers) > 0

    def waited_on(self):
        """Whether a thread of the owning process waits actively on this doorbell."""
        return load_u32(self.active) > 0

    def others_active(self):
        """Whether a thread besides the caller (itself active) waits actively on this doorbell."""
        return load_u32(self.active) > 1

    def enter_active(self):
        add_u32(self.active, 1)
        full_fence()

    def leave_active(self):
        sub_u32(self.active, 1)
        full_fence()

    def close(self):
        self.mapped.close()


cdef class Poller:
    """Waits until any of a set of inbound rings is readable, on one doorbell."""
    cdef Doorbell bell
    cdef list rings
    cdef int n
    cdef uint64_t** heads
    cdef uint64_t** tails
    cdef uint32_t** stalls      # each ring's stalled word: its frames do not end a wait while it is set
    cdef bytes _heads_store
    cdef bytes _tails_store
    cdef bytes _stalls_store
    cdef list _retired          # earlier (heads, tails, rings): a waiter may still read a pointer it took from them
    cdef double adaptive_spin   # learned: how long spinning has recently paid off
    cdef int since_probe        # waits since the last full-length spin

    def __cinit__(self, Doorbell bell):
        self.bell = bell
        self.adaptive_spin = 1.0
        self.since_probe = 0
        self.rings = []
        self.n = 0
        self._heads_store = b""
        self._tails_store = b""
        self._stalls_store = b""
        self._retired = []

    def set_rings(self, rings):
        """Replace the polled set (called rarely: when peers come and go).

        Another thread may be in ``wait`` with the GIL released, reading the arrays while they change (the
        runtime's service thread waits while a worker's death takes its ring out): it must only ever see
        ``n`` entries that exist.  So the new arrays are filled before they are published, ``n`` shrinks
        before the swap and grows after it, and the arrays and rings replaced are kept a while (a waiter may
        still hold a pointer it read from them; a ring keeps its pages mapped until it is deallocated)."""
        rings = list(rings)
        cdef int n = len(rings)
        heads_store = PyBytes_FromStringAndSize(NULL, sizeof(uint64_t*) * max(n, 1))
        tails_store = PyBytes_FromStringAndSize(NULL, sizeof(uint64_t*) * max(n, 1))
        stalls_store = PyBytes_FromStringAndSize(NULL, sizeof(uint32_t*) * max(n, 1))
        cdef uint64_t** heads = <uint64_t**>PyBytes_AS_STRING(heads_store)
        cdef uint64_t** tails = <uint64_t**>PyBytes_AS_STRING(tails_store)
        cdef uint32_t** stalls = <uint32_t**>PyBytes_AS_STRING(stalls_store)
        cdef Ring r
        for i, r in enumerate(rings):
            heads[i] = r.head
            tails[i] = r.tail
            stalls[i] = r.reader_stalled
        if n < self.n:
            self.n = n
            full_fence()
        self._retired.append((self._heads_store, self._tails_store, self._stalls_store, self.rings))
        if len(self._retired) > 64:
            del self._retired[0]
        self._heads_store, self._tails_store, self._stalls_store = heads_store, tails_store, stalls_store
        self.rings = rings
        self.heads = heads
        self.tails = tails
        self.stalls = stalls
        full_fence()
        self.n = n

    def readable(self):
        """Indices (in ``set_rings`` order) of the rings that hold a frame now."""
        cdef int i
        return [i for i in range(self.n) if load_u64(self.tails[i]) != load_u64(self.heads[i])]

    cdef inline bint _any_ready(self) nogil:
        """Whether a ring holds a frame its reader can use now (a stalled one's wait: ``Ring.set_stalled``)."""
        cdef int i
        for i in range(self.n):
            if load_u64(self.tails[i]) != load_u64(self.heads[i]) and load_u32(self.stalls[i]) == 0:
                return True
        return False

    def wait(self, double timeout_s, bint background=False, int64_t since=-1):
        """Block until a ring has data, the doorbell rings, or ``timeout_s`` passes.

        ``since``: a ``Doorbell.sequence()`` the caller read before it last looked
        for work; a ring after that returns at once.  Without it, a ring that came
        between the caller's look and this wait (another thread of this process
        took the data and rang) would be slept through.  Returns True if some ring
        is readable.  Spurious returns are allowed; callers loop.  The GIL is
        released throughout.
        """
        cdef uint32_t* word = self.bell.bg_seq if background else self.bell.seq
        cdef uint32_t* sleepers = self.bell.bg_sleepers if background else self.bell.sleepers
        cdef double start, now, spin = spin_budget()
        cdef uint32_t seen
        cdef bint ready = False, slept = False, rung
        cdef int k
        # Adaptive spinning: spin only while messages have recently come within the spin window.
        # A peer called once per round (an env actor among many) stops burning CPU it does not save.
        # Every PROBE_EVERY-th wait spins in full all the same: once a waiter sleeps, it learns only when it
        # woke, not when the message came (a wake can take 100+ us on a VM), so without probes a waiter that
        # stopped spinning would never find out that spinning pays again.
        if self.adaptive_spin < spin:
            self.since_probe += 1
            if self.since_probe >= PROBE_EVERY:
                self.since_probe = 0
            else:
                spin = self.adaptive_spin
        with nogil:
            ready = self._any_ready()
            start = monotonic_s()
            # Rung since the caller looked for work: return, so it looks again.
            rung = since >= 0 and not background and load_u32(word) != <uint32_t>since
            if not ready and not rung and not background and spin > 0:
                while True:
                    for k in range(64):
                        cpu_relax()
                    if self._any_ready():
                        ready = True
                        break
                    if since >= 0 and load_u32(word) != <uint32_t>since:
                        rung = True             # another thread of ours rang (an actor's call ended)
                        break
                    now = monotonic_s()
                    if now - start >= spin or now - start >= timeout_s:
                        break
            if not ready and not rung:
                if add_u32(sleepers, 1) == 1 and not background:
                    sleep_uncounted(self.bell.wake_counted)
                full_fence()
                seen = load_u32(word) if since < 0 or background else <uint32_t>since
                if self._any_ready():
                    ready = True
                else:
                    now = monotonic_s()
                    if timeout_s - (now - start) > 0:
                        futex_wait(word, seen, timeout_s - (now - start))
                    ready = self._any_ready()
                    slept = True
                if sub_u32(sleepers, 1) == 0 and not background:
                    wake_recounted(self.bell.wake_counted)
            if not background:
                now = monotonic_s()
                if not slept or (ready and now - start <= SPIN_SECONDS):
                    self.adaptive_spin = SPIN_SECONDS
                elif self.adaptive_spin > 1e-6:
                    self.adaptive_spin = self.adaptive_spin * 0.5
                else:
                    self.adaptive_spin = 0.0
        return ready


cdef class Ring:
    """One direction of a channel: a byte ring in a shared file, one writer, one reader."""
    cdef _Mapped mapped
    cdef uint64_t* head
    cdef uint64_t* tail
    cdef uint64_t cap
    cdef uint64_t mask
    cdef uint32_t* space_seq
    cdef uint32_t* writer_waits
    cdef uint32_t* closed
    cdef uint32_t* reader_stalled
    cdef char* data
    cdef public Doorbell reader_bell   # rung after each write (the consumer's doorbell)
    cdef public Doorbell writer_bell   # rung when the reader frees space while the writer waits

    def __cinit__(self, str path, uint64_t capacity=0, bint create=False):
        if create:
            if capacity == 0 or (capacity & (capacity - 1)) != 0:
                raise ValueError("ring capacity must be a power of two")
            self.mapped = _Mapped(path, HEADER + capacity, True)
            (<uint64_t*>(self.mapped.base + OFF_CAP))[0] = capacity
        else:
            with open(path, "rb") as f:
                hdr = f.read(HEADER)
            capacity = int.from_bytes(hdr[OFF_CAP:OFF_CAP + 8], "little")
            self.mapped = _Mapped(path, HEADER + capacity, False)
        cdef char* b = self.mapped.base
        self.head = <uint64_t*>(b + OFF_HEAD)
        self.tail = <uint64_t*>(b + OFF_TAIL)
        self.cap = capacity
        self.mask = capacity - 1
        self.space_seq = <uint32_t*>(b + OFF_SPACE_SEQ)
        self.writer_waits = <uint32_t*>(b + OFF_WRITER_WAITS)
        self.closed = <uint32_t*>(b + OFF_CLOSED)
        self.reader_stalled = <uint32_t*>(b + OFF_READER_STALLED)
        self.data = b + HEADER
        self.reader_bell = None
        self.writer_bell = None

    @property
    def path(self):
        return self.mapped.path

    @property
    def capacity(self):
        return self.cap

    @property
    def max_message(self):
        return self.cap // 2 - 16

    def close(self):
        self.mapped.close()
        store_u32(self.closed, 1)      # in the private page left behind: a late writer sees ChannelClosed

    def mark_closed(self):
        store_u32(self.closed, 1)
        full_fence()
        futex_wake_all(self.space_seq)

    def is_closed(self):
        return load_u32(self.closed) != 0

    def want_space(self, bint on):
        """Ask the reader to ring ``writer_bell`` whenever it frees space (for non-blocking writers)."""
        if on:
            add_u32(self.writer_waits, 1)
        else:
            sub_u32(self.writer_waits, 1)
        full_fence()

    def readable(self):
        return load_u64(self.tail) != load_u64(self.head)

    def set_stalled(self, bint stalled):
        """(Reader) whether a frame here would let it go on now.  While stalled (it waits for frames of its
        other rings), a writer that asks ``wake_wanted`` need not wake it for each frame it writes here, and
        those frames do not end the reader's waits (``Poller``): it reads them when one of the others comes.
        Unstalling is fenced: a frame written after it is woken for, one before it is seen by the reader's
        next look at the ring."""
        if stalled:
            store_u32(self.reader_stalled, 1)
        elif load_u32(self.reader_stalled):
            store_u32(self.reader_stalled, 0)
            full_fence()

    def wake_wanted(self):
        """(Writer, after a write) whether to ring the reader's doorbell for it."""
        full_fence()
        return load_u32(self.reader_stalled) == 0

    def pending_bytes(self):
        return load_u64(self.tail) - load_u64(self.head)

    cdef inline void _copy_in(self, uint64_t pos, const char* src, uint64_t n) nogil:
        cdef uint64_t off = pos & self.mask
        cdef uint64_t first = self.cap - off
        if first >= n:
            memcpy(self.data + off, src, n)
        else:
            memcpy(self.data + off, src, first)
            memcpy(self.data, src + first, n - first)

    cdef inline void _copy_out(self, uint64_t pos, char* dst, uint64_t n) nogil:
        cdef uint64_t off = pos & self.mask
        cdef uint64_t first = self.cap - off
        if first >= n:
            memcpy(dst, self.data + off, n)
        else:
            memcpy(dst, self.data + off, first)
            memcpy(dst + first, self.data, n - first)

    def try_write(self, payload):
        """Append one frame if it fits now; return False (writing nothing) if the ring is full.

        ``payload`` is a buffer, or a list of buffers written one after another as one frame (a scatter
        write: the frame is never assembled outside the ring)."""
        if type(payload) is list:
            return self._write_parts(<list>payload, 0.0)
        cdef Py_buffer view
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            return self._write(<const char*>view.buf, <uint64_t>view.len, 0.0)
        finally:
            PyBuffer_Release(&view)

    def write(self, payload, double timeout_s=-1.0):
        """Append one frame (a buffer, or a list of them), waiting for space (spin, then block) up to
        ``timeout_s`` (<0: forever).

        Returns False on timeout.  Raises ChannelClosed if the reader is gone.
        """
        if type(payload) is list:
            return self._write_parts(<list>payload, timeout_s)
        cdef Py_buffer view
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            return self._write(<const char*>view.buf, <uint64_t>view.len, timeout_s)
        finally:
            PyBuffer_Release(&view)

    cdef bint _write(self, const char* src, uint64_t n, double timeout_s) except -1:
        cdef uint64_t tail
        if not self._reserve(n, timeout_s, &tail):
            return False
        with nogil:
            self._copy_in(tail + 4, src, n)
        self._commit(tail, n)
        return True

    cdef bint _write_parts(self, list parts, double timeout_s) except -1:
        cdef Py_ssize_t count = len(parts), i, done = 0
        cdef Py_buffer* views = <Py_buffer*>PyMem_Malloc(sizeof(Py_buffer) * max(count, 1))
        cdef uint64_t n = 0, tail, at
        if views == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                PyObject_GetBuffer(parts[i], &views[i], PyBUF_SIMPLE)
                done += 1
                n += <uint64_t>views[i].len
            if not self._reserve(n, timeout_s, &tail):
                return False
            at = tail + 4
            with nogil:
                for i in range(count):
                    self._copy_in(at, <const char*>views[i].buf, <uint64_t>views[i].len)
                    at += <uint64_t>views[i].len
            self._commit(tail, n)
            return True
        finally:
            for i in range(done):
                PyBuffer_Release(&views[i])
            PyMem_Free(views)

    cdef bint _reserve(self, uint64_t n, double timeout_s, uint64_t* tail_out) except -1:
        """Wait for room for an ``n``-byte frame; its length is written, the caller copies the body."""
        cdef uint64_t need = (4 + n + 7) & ~(<uint64_t>7)
        cdef uint64_t head, tail
        cdef uint32_t length = <uint32_t>n
        cdef uint32_t seen
        cdef double start, now
        cdef bint ok = False, closed = False
        if n > self.cap // 2 - 16:
            raise ValueError(f"message of {n} bytes exceeds the ring's limit of {self.cap // 2 - 16}")
        with nogil:
            tail = load_u64(self.tail)
            start = -1.0
            while True:
                if self.mapped.detached:      # closed in this process: its pages are gone, nothing is written
                    closed = True
                    break
                head = load_u64(self.head)
                if self.cap - (tail - head) >= need:
                    ok = True
                    break
                if load_u32(self.closed):
                    closed = True
                    break
                if timeout_s == 0.0:
                    break
                if start < 0:
                    start = monotonic_s()
                now = monotonic_s()
                if timeout_s > 0 and now - start >= timeout_s:
                    break
                if now - start < spin_budget():
                    cpu_relax()
                    continue
                add_u32(self.writer_waits, 1)
                full_fence()
                seen = load_u32(self.space_seq)
                head = load_u64(self.head)
                if self.cap - (tail - head) < need and not load_u32(self.closed):
                    futex_wait(self.space_seq, seen, 0.05 if timeout_s < 0 else min(0.05, timeout_s))
                sub_u32(self.writer_waits, 1)
            if ok:
                self._copy_in(tail, <const char*>&length, 4)
        if closed:
            raise ChannelClosed(self.mapped.path)
        tail_out[0] = tail
        return ok

    cdef void _commit(self, uint64_t tail, uint64_t n):
        full_fence()
        store_u64(self.tail, tail + ((4 + n + 7) & ~(<uint64_t>7)))
        if self.reader_bell is not None:
            self.reader_bell._ring()

    def read(self):
        """Pop one frame as bytes, or None if the ring is empty."""
        cdef uint64_t head = load_u64(self.head)
        cdef uint64_t tail = load_u64(self.tail)
        cdef uint32_t length
        cdef uint64_t need
        if head == tail:
            return None
        self._copy_out(head, <char*>&length, 4)
        out = PyBytes_FromStringAndSize(NULL, length)
        self._copy_out(head + 4, PyBytes_AS_STRING(out), length)
        need = (4 + <uint64_t>length + 7) & ~(<uint64_t>7)
        full_fence()
        store_u64(self.head, head + need)
        full_fence()
        add_u32(self.space_seq, 1)
        if load_u32(self.writer_waits) > 0:
            futex_wake_all(self.space_seq)
            if self.writer_bell is not None:
                self.writer_bell._ring()
        return out

    def read_all(self):
        """Pop every frame currently in the ring."""
        out = []
        while True:
            m = self.read()
            if m is None:
                return out
            out.append(m)
