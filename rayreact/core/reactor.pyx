# cython: language_level=3, boundscheck=False, wraparound=False
"""The reactor scheduler: a worker's side of a replayed plan (see ``replay`` for the driver's).

A worker enters reactor mode when the driver sends ``wire.REACTOR`` with its
*program*: the reactions it owns (one per scheduled position of the period), the
channels it reads and writes, and how far back it must keep tokens::

    driver ──inbox──▶ ┌───────────────────────────────┐ ──▶ to_driver ──▶ driver (get / wait)
    actor X ─ring X→W─▶│ WorkerReactor: for each INVOKE │ ──▶ ring W→Y  ──▶ actor Y (direct, no driver)
    (dynamic inbound) ─▶│ gather tokens, run, emit       │
                        └───────────────────────────────┘

Frames on every ring are ``[kind u8][...]``: the driver writes ``INVOKE`` (the
literal arguments of one reaction, already serialized: snapshot semantics),
``TOKEN`` (a value a driver ``put`` made, a seed, a relayed result, or what a rerun of a dead
lent worker's call made), ``STOP``, ``DEAD``, ``AGE`` (a pool's member that is seldom called forgets
old tokens) and ``FETCH`` (values of this
worker's the driver wants: for a rerun, a read off the plan, a ref kept past the
plan's buffering; each answered with a ``HANDOVER`` of a copy as soon as the
worker has it); reactors write ``TOKEN`` (one per output per reader: a value is
serialized once, however many readers), ``NOTE``, ``HANDOVER`` and ``STOPPED``.

A threaded or async actor's reactions do not run on the reactor thread: each starts on the actor's own
thread pool or event loop, in invocation order, and its tokens leave when it ends, in any order
(``replay_concurrent``); the timeline still logs them in invocation order.

Tokens are never overwritten in place: a token is a new bytes object (or a new
segment file, hard-linked once per reader, each reader unlinking its link after
mapping it), so a value the script still holds stays intact.  A reactor keeps
its own outputs for ``retain`` trace events (so the driver can hand any of them
to the dynamic runtime on deoptimization) and the tokens it read for ``keep``
events (the longest distance from a write to a read of it).

Waiting is ``channel.Poller.wait``: a short spin with the GIL released, then a
futex wait on the worker's doorbell, with a timeout so a worker notices its
parent's death.  Every write that finds a ring full drains this worker's own
input rings while it waits, so no cycle of full rings can deadlock.

The driver's side lives here too, because it runs on every call: ``DriverPath``
(guard check, one INVOKE frame, a light ObjectRef; gets read tokens straight off
the rings) and ``Gather``, a futex word the workers count their frames to the
driver on, so a get of N results wakes the driver once instead of N times.
Each call wakes its worker at once (deferring a burst's wakes to its end was
slower: the workers then start later).  Large values travel as segment files
from the session's segment pool (warm pages); a reader gets its own hard link
and the pool recycles a file only once nobody maps it and no other name for it
exists.
"""

import asyncio
import collections
import copyreg
import os
import pickle
import struct
import sys
import time

from libc.stdint cimport int64_t, int32_t, uint32_t
from libc.string cimport memcmp
from libc.errno cimport errno, EINTR
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE

from .. import exceptions
from . import channel, executor, ids, wire, refcount, replay_concurrent, serialization
from .handoff import handoff
from .channel cimport _Mapped, count_woken, sleep_uncounted, wake_recounted, retire_counted, crowded
from .classify cimport NOT_PLAIN, PLAIN_NUMPY, classify

cdef extern from "channel_sync.h" nogil:
    uint32_t load_u32(uint32_t* p)
    void store_u32(uint32_t* p, uint32_t v)
    uint32_t add_u32(uint32_t* p, uint32_t v)
    void full_fence()
    void cpu_relax()
    int futex_wait(uint32_t* addr, uint32_t expected, double timeout_s)
    int futex_wake_all(uint32_t* addr)
    double monotonic_s()

cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1

_PLAIN = (int, float, bool, str, bytes, type(None))      # not ObjectRef: a ref in a replayed literal deviates
_task_id = ids.task_id

# Frame kinds.
TOKEN = 1
INVOKE = 2
STOP = 3
DEAD = 4
NOTE = 5
HANDOVER = 6
STOPPED = 7
FETCH = 8
AGE = 9                 # driver -> a pool's member: no call of its from here on reads a token older than its keep

# Token flags.
F_ERROR = 1
F_SEGMENT = 2
F_REFS = 4

# Argument spec kinds.
A_LITERAL = 0
A_PERIOD = 1
A_CONST = 2
RELAYED = -1            # the driver's spec distance of a ref it relays (made any number of periods before)
cdef int64_t C_RELAYED = RELAYED         # (compared per ref argument on the call path: a C constant)
cdef int64_t C_ANY_POSITION = -1         # a relay of any value the driver holds (plan.ANY_POSITION)

TOKEN_HEADER = struct.Struct("<BIqB")      # kind, connection, producer index, flags
INVOKE_HEADER = struct.Struct("<BqB")      # kind, index, payload kind (0 none, 1 inline, 2 segment, 3 below)
# Literals that nest refs: the payload pickles (1 or 2, the pack or its segment's path, the nested ref ids,
# [(ref id, connection, producer index)] of the values the worker gets itself), so that the worker counts
# the refs it was lent and serves the call's gets of them (replay_nested).
INVOKE_WITH_REFS = 3
TIMELINE_RECORDS = 16384
_TL_HEADER = 8                              # one u64 count, then (index, t0, t1) float64 records

_token_header_pack = TOKEN_HEADER.pack
_token_header_unpack = TOKEN_HEADER.unpack_from
_invoke_header_unpack = INVOKE_HEADER.unpack_from


cdef inline object _invoke_payload(bytes frame):
    return memoryview(frame)[INVOKE_HEADER.size:]


def token_frame(int conn, int64_t index, int flags, payload):
    """One TOKEN frame; ``payload`` is a pack (bytes) or, for ``F_SEGMENT``, a link path."""
    if flags & F_SEGMENT:
        payload = payload.encode()
    return _token_header_pack(TOKEN, conn, index, flags) + payload


def control_frame(int kind, obj=None):
    return bytes((kind,)) + (pickle.dumps(obj, protocol=5) if obj is not None else b"")


def parse_control(frame):
    return pickle.loads(memoryview(frame)[1:]) if len(frame) > 1 else None


def decode_token(frame, bint keep_link=False):
    """(connection, index, token) of a TOKEN frame; a segment token is mapped and, unless
    ``keep_link``, its link unlinked at once (the mapping outlives it)."""
    cdef int kind, conn, flags
    cdef int64_t index
    kind, conn, index, flags = _token_header_unpack(frame, 0)
    return conn, index, make_token(flags, memoryview(frame)[TOKEN_HEADER.size:], keep_link)


cdef class Token:
    """A value as it travels: a pack in memory (inline, or a mapped segment), flags, nested ref ids.

    A value a reader in the same host takes may also travel as itself (``frozen``, see :func:`frozen_token`):
    readers there take that object, and it is packed only if something else reads it."""
    cdef public int flags
    cdef public object data          # bytes or memoryview of the pack
    cdef public object path          # the segment file (or link) this process owns, if any
    cdef public object contained     # ids of refs nested in the value (F_REFS)
    cdef public object keepalive     # the original value, kept while nested refs must stay alive
    cdef public object ser           # not yet packed: frames are built straight from the pickle's buffers
    cdef public object frozen        # the value itself, nothing can change it (valid if ``is_frozen``)
    cdef public bint is_frozen

    def __init__(self, int flags, data, path=None, contained=(), keepalive=None, ser=None):
        self.flags = flags
        self.data = data
        self.path = path
        self.contained = contained
        self.keepalive = keepalive
        self.ser = ser

    @property
    def is_error(self):
        return bool(self.flags & F_ERROR)

    def value(self):
        if self.is_frozen:
            return self.frozen
        return decode(self.view())

    def view(self):
        """The pack; a segment this process wrote is mapped only when something here reads it."""
        if self.data is None:
            if self.path is not None:
                self.data = serialization.map_segment(self.path)
            elif self.ser is not None:
                self.data = self.ser.pack()
            elif self.is_frozen:
                self.data = serialize(self.frozen).pack()
        return self.data

    def descriptor(self):
        """This token as a dynamic-runtime object descriptor (the path, if any, changes owner)."""
        if self.path is not None:
            return (serialization.SEGMENT, self.path, list(self.contained), bool(self.flags & F_ERROR))
        return (serialization.INLINE, bytes(self.view()), list(self.contained), bool(self.flags & F_ERROR))

    def discard(self):
        """Give up this token's file name (the mapping, if still referenced, lives on)."""
        if self.path is not None:
            free_segment(self.path)
            self.path = None

    def free(self):
        """The owner is done with this token: drop the mapping, then the file (it may go to the pool)."""
        self.data = None
        self.ser = None
        self.keepalive = None
        self.frozen = None
        self.is_frozen = False
        self.discard()


def free_segment(path):
    """Unlink ``path``, or recycle it through the session's segment pool when it is the file's last name.

    The pool recycles a file only if no process maps it (an exclusive flock); a file
    still reachable under another name (a reader's unread link) is never recycled."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return
    if links == 1:
        serialization.segment_pool.release(path)
    else:
        serialization.segment_pool.drop_mapping(path)
        try:
            os.unlink(path)
        except OSError:
            pass


def make_token(int flags, payload, bint keep_link=False):
    """Rebuild a token from a frame payload (maps segments; unlinks our link unless ``keep_link``)."""
    contained = ()
    if flags & F_REFS:
        body, contained = pickle.loads(payload)
        payload = body
    if flags & F_SEGMENT:
        path = bytes(payload).decode() if not isinstance(payload, str) else payload
        view = serialization.map_segment(path)
        if keep_link:
            return Token(flags & ~F_SEGMENT, view, path, contained)
        try:
            os.unlink(path)
        except OSError:
            pass
        return Token(flags & ~F_SEGMENT, view, None, contained)
    # An inline pack stays a read-only view into the frame it came in (no copy).
    return Token(flags, payload, None, contained)


def _frame_from(head, ser):
    """``head`` + the pack of ``ser``: one bytes object for a small pack, else the list of its parts (the ring
    copies them in: the value's bytes are copied once)."""
    if type(ser) is Packed:
        return head + (<Packed>ser).data
    parts = ser.parts()
    parts.insert(0, head)
    return parts


def frame_for(int conn, int64_t index, Token tok, link=None):
    """A TOKEN frame for ``tok``; ``link`` is the reader's hard link when the value is a segment."""
    cdef int flags = tok.flags
    if link is None and tok.data is None and tok.ser is not None and not flags & F_REFS:
        return _frame_from(_token_header_pack(TOKEN, conn, index, flags), tok.ser)
    if link is not None:
        body = link.encode()
        flags |= F_SEGMENT
    else:
        body = tok.view()
    if flags & F_REFS:
        body = pickle.dumps((bytes(body) if link is None else link, list(tok.contained)), protocol=5)
        if link is not None:
            flags |= F_SEGMENT
    return _token_header_pack(TOKEN, conn, index, flags) + bytes(body)


_pickle_loads = pickle.loads
_pickle_plain = serialization.pickle_plain


cdef class Packed:
    """A plain value without out-of-band buffers, already packed: a bare pack, the pickle alone
    (``serialization.Serialized``'s interface)."""
    cdef readonly bytes data
    cdef readonly Py_ssize_t size
    cdef readonly list contained

    def __init__(self, bytes data):
        self.data = data
        self.size = len(data)
        self.contained = []

    def pack(self):
        return self.data

    def inline(self):
        return serialization.inline_payload(self.data)

    def write_segment(self, path):
        serialization.Serialized(self.data, [], []).write_segment(path)


def invoke_literals(int how, payload):
    """(literal arguments, ids of refs nested in them, [(ref id, connection, producer index)] of the values
    the worker serves the call itself) of an INVOKE frame's payload of kind ``how``."""
    contained = local = ()
    if how == INVOKE_WITH_REFS:
        how, payload, contained, local = _pickle_loads(payload)
    if how == 1:
        return decode(payload)[0], contained, local
    if how == 2:
        path = payload if type(payload) is str else bytes(payload).decode()
        return serialization.loads_pack(serialization.map_segment(path))[0], contained, local
    return (), contained, local


def decode(data):
    """``serialization.loads_pack``, without its generality for packs that carry no buffers."""
    if type(data) is bytes and data[0] == 0x80:
        return _pickle_loads(data)
    return serialization.loads_pack(data)


def serialize(value, bint is_error=False):
    """``serialization.serialize``, with the stock pickler for plain values (several times faster)."""
    cdef int how = NOT_PLAIN if is_error else classify(value, _PLAIN, 2)
    if how == NOT_PLAIN:
        return serialization.serialize(value, is_error=is_error)
    # No ObjectRef in _PLAIN: nothing nested to note, so no contained-ref bookkeeping either.
    try:
        inband, raws = _pickle_plain(value, how)
    except Exception:  # noqa: BLE001 - (a registered serializer's function only cloudpickle can send)
        return serialization.serialize(value, is_error=is_error)
    if not raws:
        return Packed(inband)
    return serialization.Serialized(inband, raws, [])


cdef class Gather:
    """A futex word counting frames written to the driver.

    The driver sleeps until the count reaches a target (the tokens its get still
    misses), so a gather of N results wakes it once, not N times; writers make
    the wake syscall only when the target is met and the driver sleeps.
    """
    cdef _Mapped mapped
    cdef uint32_t* arrived
    cdef uint32_t* target
    cdef uint32_t* sleeping
    cdef uint32_t* wake_counted     # a writer counted the driver awake when it woke it
    cdef uint32_t spare[4]          # what the words point at once closed (a late bump must not touch the unmapped)
    cdef readonly str path

    def __cinit__(self, str path, bint create=False):
        self.path = path
        self.mapped = _Mapped(path, 64, create)
        cdef char* base = self.mapped.base
        self.arrived = <uint32_t*>base
        self.target = <uint32_t*>(base + 4)
        self.sleeping = <uint32_t*>(base + 8)
        self.wake_counted = <uint32_t*>(base + 12)

    cdef inline void add(self) nogil:
        cdef uint32_t now = add_u32(self.arrived, 1)
        full_fence()
        if load_u32(self.sleeping) and <int32_t>(now - load_u32(self.target)) >= 0:
            count_woken(self.wake_counted)      # (channel's wake-counted protocol, as a Doorbell's ring)
            futex_wake_all(self.arrived)

    def bump(self):
        """Wake the driver now (a death, an alarm): counts as one frame."""
        self.add()

    def count(self):
        return load_u32(self.arrived)

    def wait(self, uint32_t target, double timeout_s, double spin_s=0.0, bint counted=True):
        """Until the count reaches ``target`` (or the timeout); the GIL is released.  ``counted``: the
        caller is the driver's main thread, off the awake count while it sleeps here (a helper thread,
        while the main thread goes on, is not)."""
        cdef double start = monotonic_s(), now
        cdef uint32_t cur
        cdef bint met = False
        cdef bint interrupted
        cdef int k
        with nogil:
            while True:
                cur = load_u32(self.arrived)
                if <int32_t>(cur - target) >= 0:
                    met = True
                    break
                now = monotonic_s()
                if now - start >= timeout_s:
                    break
                if now - start < spin_s and not crowded():
                    for k in range(32):
                        cpu_relax()
                    continue
                store_u32(self.target, target)
                store_u32(self.sleeping, 1)
                full_fence()
                cur = load_u32(self.arrived)
                interrupted = False
                if <int32_t>(cur - target) < 0:
                    if counted:
                        sleep_uncounted(self.wake_counted)
                    interrupted = futex_wait(self.arrived, cur, min(timeout_s - (now - start), 0.5)) != 0 \
                        and errno == EINTR
                    if counted:
                        wake_recounted(self.wake_counted)
                store_u32(self.sleeping, 0)
                if interrupted:         # a signal (Ctrl-C): the caller checks for it
                    break
        return met

    def close(self):
        # A death noticed on the service thread may bump a gather that the handover thread is closing.
        retire_counted(self.wake_counted)     # (and a writer still to come counts it no more)
        self.spare[0] = load_u32(self.arrived)
        self.spare[1] = self.spare[2] = self.spare[3] = 0
        self.arrived, self.target, self.sleeping = &self.spare[0], &self.spare[1], &self.spare[2]
        self.wake_counted = &self.spare[3]
        self.mapped.close()


_Token_sentinel = object()
cdef object _ndarray = None
cdef object _npgeneric = None
cdef object _npvoid = None
cdef object _np_array = None


cdef object _frozen(value, dict seen):
    """``value`` as it is now, out of its maker's reach, or the sentinel if that takes a pickle: immutable
    scalars as they are, a numpy array as a view of a read-only copy (as a reader would map it: its flag
    cannot be set back).  ``seen``: what was frozen already, by id (an array passed twice stays one)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is _ndarray:
        if value.dtype.hasobject:
            return _Token_sentinel
        frozen = seen.get(id(value))
        if frozen is None:
            copy = _np_array(value, order="K", copy=True)
            copy.flags.writeable = False
            frozen = seen[id(value)] = copy.view()
        return frozen
    if isinstance(value, _npgeneric) and kind.__module__ == "numpy" and not isinstance(value, _npvoid):
        return value                      # a numpy scalar: immutable
    return _Token_sentinel


cdef Py_ssize_t _size_of(value):
    kind = type(value)
    if kind is _ndarray:
        return value.nbytes
    if kind is str or kind is bytes:
        return len(value)
    return 16


def frozen_token(value):
    """A token carrying ``value`` itself when it can be frozen (see :class:`Token`): scalars, arrays and tuples
    of them, small enough to travel inline should something outside the process read them; else None."""
    global _ndarray, _npgeneric, _npvoid, _np_array
    if _ndarray is None:
        import numpy
        _ndarray, _npgeneric, _npvoid, _np_array = numpy.ndarray, numpy.generic, numpy.void, numpy.array
    cdef dict seen = {}
    cdef Py_ssize_t size
    if type(value) is tuple and len(value) <= 16:
        size = 0
        for item in value:
            size += _size_of(item)
        if size > serialization.INLINE_LIMIT:
            return None
        items = []
        for item in value:
            item = _frozen(item, seen)
            if item is _Token_sentinel:
                return None
            items.append(item)
        frozen = tuple(items)
    else:
        if _size_of(value) > serialization.INLINE_LIMIT:
            return None
        frozen = _frozen(value, seen)
        if frozen is _Token_sentinel:
            return None
    cdef Token tok = Token(0, None)
    tok.frozen = frozen
    tok.is_frozen = True
    return tok


def serialize_token(value, bint is_error, shm_prefix, int64_t index, int conn):
    """Serialize one value once: inline pack, or a segment file this process owns."""
    ser = serialize(value, is_error)
    cdef int flags = F_ERROR if is_error else 0
    contained = tuple(ser.contained)
    if contained:
        flags |= F_REFS
    if ser.size <= serialization.INLINE_LIMIT:
        return Token(flags, None, None, contained, value if contained else None, ser)
    path = f"{shm_prefix}-rt{index}c{conn}-{os.urandom(6).hex()}"
    if contained or not handoff.claim(ser, path):
        ser.write_segment(path)
    return Token(flags, None, path, contained, value if contained else None)


class TimelineLog:
    """Reaction start/end times in a small shared file the driver reads at any time."""

    def __init__(self, path, create):
        import mmap
        size = _TL_HEADER + TIMELINE_RECORDS * 24
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.path = path
        self.count = memoryview(self.mm)[:8].cast("Q")
        self.records = memoryview(self.mm)[_TL_HEADER:].cast("d")

    def last_index(self):
        """The index of the last reaction this worker finished (-1: none yet)."""
        n = self.count[0]
        if n == 0:
            return -1
        return int(self.records[((n - 1) % TIMELINE_RECORDS) * 3])

    def read(self):
        n = self.count[0]
        first = max(0, n - TIMELINE_RECORDS)
        out = []
        for k in range(first, n):
            j = (k % TIMELINE_RECORDS) * 3
            out.append((int(self.records[j]), self.records[j + 1], self.records[j + 2]))
        return out

    def close(self):
        try:
            self.count.release()
            self.records.release()
            self.mm.close()
        except (BufferError, ValueError):
            pass


class _ReplayHost:
    """The executor's host for replayed reactions: arguments come gathered, outputs are tokens per connection."""

    run_async = staticmethod(asyncio.run)
    user_errors_only = False

    def __init__(self, worker, shm_prefix):
        self.worker = worker
        self.shm_prefix = shm_prefix
        self.index = 0                   # the invocation running now (segment names carry it)
        self.frozen_conns = ()           # connections a reader in this process takes: their values travel as themselves

    def resolve(self, args, kwargs):
        return args, kwargs

    def store(self, conn, value, is_error=False):
        if is_error:
            # Packed at once: the executor gives one error token to every output, and _emit reads it per reader.
            return Token(F_ERROR, serialization.serialize(value, is_error=True).pack())
        if conn in self.frozen_conns:
            tok = frozen_token(value)
            if tok is not None:
                return tok
        return serialize_token(value, False, self.shm_prefix, self.index, conn)

    @property
    def interrupt_cancels(self):
        return not self.worker.is_actor

    def end_process(self, code):
        self.worker.end_process(code)

    @property
    def current_task_id(self):
        return self.worker.current_task_id

    @property
    def actor_id(self):
        return self.worker.actor_id


def _call_difference(Op op, actor_id, method, tuple args, dict kwargs, int nret):
    """How a call differs from the plan's call here (None: it is another call altogether)."""
    if op.kind != CALL or op.method != method:
        return None
    if op.actor != actor_id:
        return "on another actor"
    if op.nret != nret:
        return f"with num_returns={nret} (the plan's has {op.nret})"
    if len(args) != op.nargs:
        return f"with {len(args)} positional arguments (the plan's has {op.nargs})"
    return f"with keyword arguments {sorted(kwargs or ())} (the plan's has {sorted(op.kwnames)})"


def _get_difference(Op op, object_ids, timeout):
    n = len(object_ids)
    if op.kind != GET:
        return f"a get of {n} refs"
    if n != len(op.reads):
        return f"a get of {n} refs (the plan's takes {len(op.reads)})"
    return "a get with a timeout (the plan's has none)" if timeout is not None else \
        "a get without a timeout (the plan's has one)"


def _wait_difference(Op op, object_ids, int num_returns, timeout):
    n = len(object_ids)
    if op.kind != WAIT:
        return f"a wait on {n} refs for {num_returns}"
    if n != len(op.reads):
        return f"a wait on {n} refs (the plan's waits on {len(op.reads)})"
    if num_returns != op.num_returns:
        return f"a wait for num_returns={num_returns} (the plan's waits for {op.num_returns})"
    return "a wait with a timeout (the plan's has none)" if timeout is not None else \
        "a wait without a timeout (the plan's has one)"


cdef class Step:
    """One reaction a worker runs, at its position of the period: its target (a method name, or a task's
    code id), where each argument comes from (``specs``: ``(name, A_LITERAL, literal slot, 0)``,
    ``(name, A_CONST, connection, token key)`` or ``(name, A_PERIOD, connection, distance)``), the
    connections its returns go to, and its name in errors and process titles."""
    cdef public object target
    cdef public tuple specs
    cdef public tuple outputs
    cdef public str display

    def __init__(self, target, tuple specs, tuple outputs, str display):
        self.target = target
        self.specs = specs
        self.outputs = outputs
        self.display = display

    def __reduce__(self):
        return (Step, (self.target, self.specs, self.outputs, self.display))


class Program:
    """A worker's part of a plan, as core.replay_wiring compiles it and sends it in ``wire.Reactor('start',
    program)``: the worker runs ``steps`` (position -> :class:`Step`) once per period.

    ``plan`` the run's number; ``name`` the reactor's; ``period``, ``start`` the plan's; ``routes``:
    connection -> (whether this worker reads it too, indices of the out rings to its other readers, whether
    to keep the token for the driver: it never sees it, or a lent task worker reads it);
    ``writers``: connection -> the reactor writing it; ``in_rings``/``out_rings``: (path, doorbell path) of
    each ring (the first of each: from and to the driver); ``out_readers``: the reactor reading each out ring;
    ``host_bell``: a guest's host's stepping doorbell (co-location: :class:`HostReactor`), else None;
    ``const_conns``: connections holding constants;
    ``keep``, ``retain``: how many positions back tokens are kept (read again, handed over); the rest names
    the worker's files and the spin to use while replaying (``dynamic_spin``: restored after)."""

    FIELDS = ("plan", "name", "period", "start", "steps", "routes", "writers", "in_rings", "out_rings",
              "out_readers", "const_conns", "keep", "retain", "shm_prefix", "timeline", "spin", "gather",
              "pool_limit", "dynamic_spin", "host_bell")
    __slots__ = FIELDS

    def __init__(self, **fields):
        missing = set(self.FIELDS) - set(fields)
        unknown = set(fields) - set(self.FIELDS)
        if missing or unknown:
            raise TypeError(f"Program: missing {sorted(missing)}, unknown {sorted(unknown)}")
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self):
        return (_program, tuple(getattr(self, name) for name in self.FIELDS))


def _program(*values):
    return Program(**dict(zip(Program.FIELDS, values)))


cdef class WorkerReactor:
    """Runs one worker's static reaction order until the driver says STOP."""

    cdef object worker
    cdef object program
    cdef object inbox
    cdef bint inbox_stalled          # told the driver not to ring for invocations: we wait for tokens
    cdef object to_driver
    cdef list in_rings
    cdef list out_rings
    cdef object poller
    cdef object invocations
    cdef dict buf
    cdef dict consts
    cdef dict retained
    cdef dict reactions
    cdef dict routes
    cdef dict writers
    cdef dict dead
    cdef object const_conns
    cdef int64_t period
    cdef int64_t start
    cdef int64_t keep
    cdef int64_t retain
    cdef int64_t first_position
    cdef object shm_prefix
    cdef object log
    cdef object log_count
    cdef object log_records
    cdef int64_t logged
    cdef bint exiting
    cdef bint raised_noted
    cdef bint stopping               # a STOP is queued: calls arriving now run after the invocations before it
    cdef set fetching                # values the driver asked for (FETCH) that this worker has not made yet
    cdef int64_t last_index          # the trace index of the last reaction run here
    cdef object held                 # those calls (dynamic messages), in arrival order
    cdef object calls                # a threaded or async actor's calls running (replay_concurrent), else None
    cdef bint completing             # ended calls' tokens are being written (their writes may drain again)
    cdef bint serving_calls          # past the STOP of a threaded or async actor: calls start as they come
    cdef object bells
    cdef object host
    cdef Gather gather
    cdef readonly object name
    cdef readonly object plan
    cdef readonly tuple out_readers
    cdef readonly bint hosted         # stepped by the host's HostReactor (co-location), never waiting itself
    cdef public dict direct           # out ring index -> the co-hosted WorkerReactor reading it (tokens by reference)
    cdef public bint finished         # (hosted) the run is over for this worker: STOP acknowledged, or exiting
    cdef public bint released         # (hosted) and its reactor is closed: its thread may go on
    cdef public object failure        # (hosted) what ended the guest while stepped (its thread raises it)
    cdef public object stepper        # (hosted) the HostReactor stepping it
    cdef bint awaiting_ack            # (hosted) handed over at STOP: serving messages until the driver's ACK
    cdef object lent_of               # (hosted) (index, values lent) of the kind-3 invocation _ready last read
    cdef bint closed

    def __init__(self, worker, program, bint hosted=False):
        self.worker = worker
        self.program = program
        self.name = program.name
        self.plan = program.plan
        self.out_readers = tuple(program.out_readers)
        self.hosted = hosted
        self.direct = {}
        self.finished = False
        self.released = False
        self.failure = None
        self.stepper = None
        self.awaiting_ack = False
        self.closed = False
        self.period = program.period
        self.start = program.start
        self.keep = program.keep
        self.retain = program.retain
        self.reactions = program.steps
        self.first_position = min(self.reactions)
        self.routes = program.routes
        self.writers = program.writers
        self.shm_prefix = program.shm_prefix
        self.const_conns = program.const_conns
        self.buf = {}
        self.consts = {}
        self.retained = {}
        self.dead = {}
        self.invocations = collections.deque()
        self.exiting = False
        self.raised_noted = False
        self.stopping = False
        self.fetching = set()
        self.last_index = -1
        self.held = collections.deque()
        self.bells = {}
        self.host = _ReplayHost(worker, self.shm_prefix)
        self.calls = None
        if worker.is_actor and worker.runs_calls_concurrently:
            self.calls = replay_concurrent.ConcurrentCalls(worker, self.host, worker.bell.ring)
        self.completing = False
        self.serving_calls = False
        self.in_rings = []
        for path, writer_bell in program.in_rings:
            ring = channel.Ring(path)
            ring.writer_bell = self._bell(writer_bell)
            self.in_rings.append(ring)
        self.inbox = self.in_rings[0]
        self.out_rings = []
        for path, reader_bell in program.out_rings:
            ring = channel.Ring(path)
            ring.reader_bell = self._bell(reader_bell) if reader_bell else None
            self.out_rings.append(ring)
        self.to_driver = self.out_rings[0]
        self.gather = Gather(program.gather)
        if hosted:
            # Writers ring the host's stepping doorbell; the guest's own thread pumps its inbound ring.
            self.poller = channel.Poller(self._bell(program.host_bell))
            self.poller.set_rings(self.in_rings)
        else:
            self.poller = channel.Poller(worker.bell)
            self.poller.set_rings(self.in_rings + [worker.inbound])
        self.log = TimelineLog(program.timeline, False)
        self.log_count = self.log.count
        self.log_records = self.log.records
        self.logged = self.log_count[0]
        if program.spin is not None:
            channel.set_spin_seconds(program.spin)        # restored from program.dynamic_spin on close
        if not serialization.segment_pool.limit:
            serialization.segment_pool.limit = program.pool_limit or 0
        handoff.ready()

    def _bell(self, path):
        bell = self.bells.get(path)
        if bell is None:
            bell = self.bells[path] = channel.Doorbell(path)
        return bell

    # ------------------------------------------------------------------ main loop
    def run(self):
        """Execute invocations in order until STOP (then hand over and wait for the ACK)."""
        cdef object item
        try:
            while True:
                item = self._next_invocation()
                if item is None:
                    return
                if item[0] == STOP:
                    self._stop(item[1])
                    return
                if item[0] == AGE:
                    self._age(item[1])
                    continue
                self._react(item[1], item[2], _invoke_payload(item[3]))
        finally:
            self._close()

    cdef object _next_invocation(self):
        while not self.invocations:
            if self.exiting:
                return None
            if not self._drain():
                self._wait()
        return self.invocations.popleft()

    cdef bint _drain(self) except *:
        """Read every frame waiting on the input rings, and serve dynamic messages.

        The driver stops a run without waiting for it, so the calls its script makes next may arrive
        while invocations from before the STOP are still to run: those calls are held until they have
        (the same caller's calls run in order).  The driver writes the STOP before any such call, so the
        rings are read again before a call is served, to see a STOP that came first."""
        cdef bint progressed = self._complete()
        if self._read_rings():
            progressed = True
        worker = self.worker
        if worker.has_deferred() if self.hosted else worker.has_messages():
            while True:
                msg = worker.next_deferred() if self.hosted else worker.next_message(False)
                if msg is None:
                    break
                progressed = True
                if msg.KIND == wire.CALL or msg.KIND == wire.RUN_TASK:
                    if not self.stopping:
                        self._read_rings()
                    if self.stopping and not self.serving_calls:
                        self.held.append(msg)
                        continue
                worker.handle_message(msg)
                if not worker.running:
                    self.exiting = True
                    break
        return progressed

    cdef bint _read_rings(self) except *:
        cdef bint progressed = False
        cdef object ring, frame
        cdef int kind
        for ring in self.in_rings:
            while True:
                frame = ring.read()
                if frame is None:
                    break
                progressed = True
                kind = frame[0]
                if kind == TOKEN:
                    self._store(frame)
                elif kind == INVOKE:
                    index, how = _invoke_header_unpack(frame, 0)[1:]
                    # The frame itself, not a view of it: a tuple of ints and bytes leaves the cycle collector's
                    # care at its first pass, where a script that runs ahead of its workers would have it walk
                    # every queued view at each full collection.
                    self.invocations.append((INVOKE, index, how, frame))
                elif kind == STOP:
                    self.invocations.append((STOP, parse_control(frame)))
                    self.stopping = True
                elif kind == DEAD:
                    name, payload = parse_control(frame)
                    self.dead[name] = payload
                elif kind == FETCH:
                    self._fetch(parse_control(frame), False)
                elif kind == AGE:
                    self.invocations.append((AGE, parse_control(frame)))   # (in order with the invocations)
        return progressed

    cdef void _fetch(self, keys, bint finished) except *:
        """The driver wants values only this worker holds (a rerun's inputs, a read off the plan, a ref kept
        past the plan's buffering): hand a copy of each over now, or as soon as it is made; one made and no
        longer kept, or never to be made here (``finished``), is handed over as lost (an error)."""
        for key in keys:
            key = tuple(key)
            tok = self.retained.get(key)
            if tok is None:
                tok = self.buf.get(key)
            if tok is not None:
                self._hand_copy(key, <Token>tok)
            elif key[1] <= self.last_index or finished:
                lost = serialization.serialize(exceptions.RaySystemError(
                    f"rayreact lost a replayed value {key} that a rerun of a dead worker's call needed"),
                    is_error=True).pack()
                self._write(self.to_driver, control_frame(HANDOVER, (key, (serialization.INLINE, lost, [], True))))
            else:
                self.fetching.add(key)

    cdef void _hand_copy(self, key, Token tok) except *:
        """HANDOVER a copy of ``tok``: the driver gets a link of its own to a segment (the token stays ours)."""
        cdef bint error = tok.flags & F_ERROR
        cdef bint copied = False
        if tok.path is None and len(tok.view()) > serialization.INLINE_LIMIT:
            # A big value we hold only mapped (its link is gone): a file of its own, too big for the ring.
            tok = serialize_token(tok.value(), error, self.shm_prefix, key[1], key[0])
            copied = True
        if tok.path is not None:
            link = f"{tok.path}.d{os.urandom(3).hex()}"
            os.link(tok.path, link)
            desc = (serialization.SEGMENT, link, list(tok.contained), error)
            if copied:
                tok.discard()
        else:
            desc = (serialization.INLINE, bytes(tok.view()), list(tok.contained), error)
        self._write(self.to_driver, control_frame(HANDOVER, (key, desc)))

    cdef void _store(self, frame) except *:
        conn, index, tok = decode_token(frame)
        self._accept(conn, index, tok)

    cdef void _accept(self, int conn, int64_t index, tok) except *:
        if conn in self.const_conns:
            self.consts[(conn, index)] = tok
        else:
            self.buf[(conn, index)] = tok

    cdef void _wait(self) except *:
        if refcount.released:
            self.worker.flush_releases()
        cdef int64_t since = -1
        if self.calls is not None:
            # A call that ends rings our doorbell from its own thread: a ring after this look is not slept through.
            since = self.worker.bell.sequence()
            if self.calls.finished:
                return
        if not self.poller.wait(1.0, False, since):
            if os.getppid() == 1:
                os._exit(1)

    cdef Token _token(self, int conn, int64_t index, bint const):
        cdef object key = (conn, index)
        cdef object tok
        while True:
            tok = (self.consts if const else self.buf).get(key)
            if tok is not None:
                self._stall_inbox(False)
                return tok
            writer = self.writers.get(conn)
            if writer in self.dead:
                # Its frames were all read before its DEAD notice: this one will never come.
                self._stall_inbox(False)
                return Token(F_ERROR, self.dead[writer])
            if self.exiting:
                self._stall_inbox(False)
                return Token(F_ERROR, serialization.serialize(exceptions.RaySystemError(
                    "worker exiting"), is_error=True).pack())
            if not self._drain():
                self._stall_inbox(True)
                self._wait()

    cdef void _stall_inbox(self, bint stalled) except *:
        """Whether the next invocation is of no use before tokens come: then the driver writes invocations
        without waking us for each (a script running ahead of its workers woke them for every call)."""
        if stalled != self.inbox_stalled:
            self.inbox_stalled = stalled
            self.inbox.set_stalled(stalled)

    # ------------------------------------------------------------------ one reaction
    cdef void _react(self, int64_t index, int how, payload) except *:
        cdef int64_t position = (index - self.start) % self.period
        cdef double t0 = monotonic_s()
        cdef Token tok
        cdef Token failed = None
        cdef Step step = <Step>self.reactions[position]
        method, specs, outputs, name = step.target, step.specs, step.outputs, step.display
        if position == self.first_position:
            self._age(index)
        local = ()
        if how == 1:
            literals = decode(payload)[0]
        elif how == 0:
            literals = ()
        else:
            literals, contained, local = invoke_literals(how, payload)
            if contained:
                self.worker.received(contained)     # lent by the driver: given back as each is dropped
        args = []
        kwargs = {}
        for spec in specs:
            kind = spec[1]
            if kind == A_LITERAL:
                value = literals[spec[2]]
            else:
                if kind == A_PERIOD:
                    tok = self._token(spec[2], index - spec[3], False)
                else:
                    tok = self._token(spec[2], spec[3], True)
                if tok.flags & F_ERROR:
                    if failed is None:
                        failed = tok
                    continue
                value = tok.value()
            if type(spec[0]) is str:
                kwargs[spec[0]] = value
            else:
                args.append(value)
        payload = literals = None
        exiting = False
        if failed is not None:
            # A failed dependency: every output is that same error, as in dynamic mode.
            results = [(conn, Token(failed.flags & F_ERROR, failed.view())) for conn in outputs]
        elif self.calls is not None:
            self.host.index = index
            self.worker.current_task_id = _task_id()
            self.calls.start(index, method, name, args, kwargs, outputs, t0)
            return                          # its tokens leave once it has ended (_complete)
        elif not local:
            results, exiting = self._call(index, method, name, args, kwargs, outputs)
        else:
            lent = self.worker.replay_values
            for oid, conn, producer in local:
                lent[oid] = self._token(conn, producer, False)
            try:
                results, exiting = self._call(index, method, name, args, kwargs, outputs)
            finally:
                for item in local:
                    lent.pop(item[0], None)
        args = kwargs = None                # the driver frees an argument file once this reaction is logged
        self._finish(index, results, exiting, t0)

    cdef bint _complete(self) except *:
        """Write the tokens of the threaded or async actor's calls that have ended."""
        if self.calls is None or self.completing or not self.calls.finished:
            return False
        self.completing = True
        try:
            for index, results, status, t0 in self.calls.take():
                if status == executor.RAISED or status == executor.PARTIAL:
                    self._note_raised(index)
                self._finish(index, results, status == executor.EXITED, t0)
        finally:
            self.completing = False
        return True

    cdef void _finish(self, int64_t index, results, bint exiting, double t0) except *:
        """A reaction has run: its tokens leave, and it is logged (a threaded or async actor's calls in
        invocation order, once every earlier one has ended too)."""
        handoff.commit()                    # results born in arena slots change hands (or are copied) now
        for conn, tok in results:
            self._emit(conn, index, tok)
        results = None
        if self.calls is None:
            self._log(index, t0, monotonic_s())
            self.last_index = index
        else:
            for logged in self.calls.loggable(index, t0, monotonic_s(), exiting):
                self._log(logged[0], logged[1], logged[2])
                self.last_index = logged[0]
        handoff.refill()
        if exiting:
            self.to_driver.write(control_frame(NOTE, ("exit", index)), 1.0)
            self.gather.add()
            self.worker.exit_now()

    cdef tuple _call(self, int64_t index, method, name, list args, dict kwargs, tuple outputs):
        """Run one reaction's call: ``(results as (conn, token) pairs, whether the actor now ends)``."""
        worker = self.worker
        host = self.host
        host.index = index
        cdef bint actor = worker.is_actor          # else a pool worker lent to a task reactor: method is a code id
        instance = worker.actor_instance if actor else None
        worker.current_task_id = _task_id()
        if not actor:
            # ray.cancel of this invocation (the driver names it in our doorbell page, then sends SIGINT until
            # the worker takes one): skipped if it has not started, interrupted if it runs, as in dynamic mode.
            if worker.bell.cancelled_invocation() == index:
                return executor.fail(host, name, KeyboardInterrupt(), outputs)[0], False
            worker.begin_replayed_task(index)
        try:
            target = worker.call_target(method) if actor else worker.load_code(method)
            tracer = worker.tracer
            if tracer is not None and not (actor and method.startswith("__ray")):
                # rayreact compare: replayed calls are traced like dynamic ones
                target = executor.traced(tracer, "actor_call" if actor else "task", target,
                                         method if actor else None,
                                         type(instance).__module__ if actor else getattr(target, "__module__", None))
            if not actor:
                target = worker.as_task(target)
            results, status = executor.run(host, name, target, args, kwargs, outputs, len(outputs), instance)
        except BaseException as exc:  # noqa: BLE001 - a cancel's SIGINT just outside the call, code that won't load
            results, status = executor.fail(host, name, exc, outputs, instance)
        finally:
            if not actor:
                worker.end_replayed_task()
        if status == executor.RAISED or status == executor.PARTIAL:
            self._note_raised(index)
        return results, status == executor.EXITED

    cdef void _note_raised(self, int64_t index) except *:
        if not self.raised_noted:
            self.raised_noted = True
            self._write(self.to_driver, control_frame(NOTE, ("raised", index)))

    cdef void _emit(self, int conn, int64_t index, Token tok) except *:
        """Send one output token to every reader: one serialization, one frame per reader."""
        route = self.routes.get(conn)
        if route is None:
            return
        local, targets, retain = route
        cdef object frame = None
        cdef bint keep = retain or tok.flags & F_REFS
        if (local or keep) and not tok.is_frozen:
            tok.view()          # packed now: the value is a snapshot, whatever the actor does with it next
        if local:
            self.buf[(conn, index)] = tok
        for target in targets:
            if self.direct:
                reader = self.direct.get(target)
                if reader is not None:
                    # A co-hosted reactor: the same token, never copied to a ring; the value itself if frozen,
                    # else packed (or mapped) once.
                    if not tok.is_frozen:
                        tok.view()
                    (<WorkerReactor>reader)._accept(conn, index, tok)
                    continue
            if tok.path is not None:
                link = f"{tok.path}.{target}"
                try:
                    os.link(tok.path, link)
                except OSError:
                    link = None
                self._write(self.out_rings[target], frame_for(conn, index, tok, link))
            else:
                if frame is None:
                    frame = frame_for(conn, index, tok, None)
                frame = self._write(self.out_rings[target], frame)
        if self.fetching and (conn, index) in self.fetching:
            self.fetching.discard((conn, index))
            self._hand_copy((conn, index), tok)
        tok.ser = None          # frames are built: no reference to the actor's own buffers remains
        if tok.flags & F_REFS:
            self._write(self.to_driver, control_frame(NOTE, ("refs", index)))
        if keep:
            # The driver keeps what it receives; values it never sees wait here for a deopt, and those a lent
            # task worker reads for a rerun of its calls, should it die.
            self.retained[(conn, index)] = tok
        elif tok.path is not None:
            tok.discard()       # the readers hold their own links

    cdef object _write(self, ring, frame):
        """Write without ever blocking on a full ring: drain our inputs while we wait for space.  Returns the
        frame as written: a list of parts is joined before waiting (the wait may run a dynamic call, which
        must not change what the reader gets), and the caller writes that to its other readers."""
        frame = self._put(ring, frame)
        if ring is self.to_driver:
            self.gather.add()
        return frame

    cdef object _put(self, ring, frame):
        try:
            if ring.try_write(frame):
                return frame
            if type(frame) is list:
                frame = b"".join(frame)
            ring.want_space(True)
            try:
                while not ring.try_write(frame):
                    if ring.is_closed() or self.exiting:
                        return frame
                    if self.hosted:
                        self._drain()
                        self.stepper.step_while_waiting(0.05)     # (its reader may be one of them)
                    elif not self._drain():
                        self.poller.wait(0.05)
                    if os.getppid() == 1:
                        os._exit(1)
            finally:
                ring.want_space(False)
        except channel.ChannelClosed:
            pass                          # its reader died: nobody will read it (the run frees its files)
        return frame

    cdef void _log(self, int64_t index, double t0, double t1) except *:
        cdef int64_t j = (self.logged % TIMELINE_RECORDS) * 3
        records = self.log_records
        records[j] = <double>index
        records[j + 1] = t0
        records[j + 2] = t1
        self.logged += 1
        self.log_count[0] = self.logged

    cdef void _age(self, int64_t index) except *:
        """Forget tokens no reaction of ours can read any more, and outputs past the retention window."""
        cdef int64_t oldest = index - self.keep
        if self.buf:
            for key in [k for k in self.buf if k[1] < oldest]:
                del self.buf[key]
        oldest = index - self.retain
        if self.retained:
            for key in [k for k in self.retained if k[1] < oldest]:
                tok = self.retained.pop(key)
                (<Token>tok).discard()

    # ------------------------------------------------------------------ stop
    cdef void _stop(self, wanted) except *:
        """Every invocation before STOP has run: hand over what the driver asks for, then wait for its ACK."""
        self._hand_over(wanted)
        worker = self.worker
        plan_id = self.program.plan
        while worker.running:
            self._read_inbox_stopped()
            msg = worker.next_message(False)
            if msg is None:
                self.poller.wait(1.0)
                if os.getppid() == 1:
                    os._exit(1)
                continue
            if msg.KIND == wire.REACTOR and msg.verb == "ack" and msg.body == plan_id:
                break
            worker.handle_message(msg)

    cdef void _hand_over(self, wanted) except *:
        if self.calls is not None:
            # A threaded or async actor: every call before the STOP has started.  Calls that came after it start
            # now (one of those may be what a running call waits for), and the running ones are let finish.
            self.serving_calls = True
            self.worker.defer_first(self.held)
            self.held.clear()
            while self.calls.running and not self.exiting:
                if not self._drain():
                    self._wait()
        if self.fetching:                 # asked for, never made here: the driver must not wait for them
            self._fetch(list(self.fetching), True)
            self.fetching.clear()
        for key in wanted:
            tok = self.retained.get(tuple(key))
            if tok is None:
                tok = self.buf.get(tuple(key))
            if tok is None:
                continue
            desc = (<Token>tok).descriptor()
            (<Token>tok).path = None          # the driver owns the file now
            self._write(self.to_driver, control_frame(HANDOVER, (tuple(key), desc)))
        for ring in self.in_rings[1:]:
            ring.mark_closed()
        self._write(self.to_driver, control_frame(STOPPED, self.program.plan))
        # Values the driver adopted may nest refs we keep alive: hold them until it has them.  The calls
        # held back run now, first, and so do calls that arrive before the ACK: another worker's reaction,
        # which the driver's handover still waits for, may need one of them.
        self.worker.defer_first(self.held)
        self.held.clear()

    cdef void _read_inbox_stopped(self) except *:
        # A rerun of a dead lent worker's call may still FETCH what we kept; a token it forwards now needs no
        # reader (kept until _close, which unmaps it).
        while True:
            frame = self.inbox.read()
            if frame is None:
                return
            if frame[0] == FETCH:
                self._fetch(parse_control(frame), True)
            elif frame[0] == TOKEN:
                self._store(frame)            # mapped and its link unlinked; freed at _close

    cdef void _close(self) except *:
        if self.closed:
            return
        self.closed = True
        if self.held:                     # exiting early: the worker's loop answers them (or fails them)
            self.worker.defer_first(self.held)
            self.held.clear()
        for tok in self.retained.values():
            (<Token>tok).discard()
        self.retained.clear()
        self.buf.clear()
        self.consts.clear()
        for ring in self.in_rings + self.out_rings:
            try:
                ring.close()
            except Exception:
                pass
        self.log_count = self.log_records = None
        self.log.close()
        self.gather.close()
        if self.program.dynamic_spin is not None and not self.hosted:
            channel.set_spin_seconds(self.program.dynamic_spin)     # (a host restores it when its last run ends)


    # ------------------------------------------------------------------ stepped by a host (co-location)
    cpdef bint step(self) except *:
        """Run what can run now without waiting (a hosted reactor): whether anything happened.  Sets
        ``finished`` once the run is over for this worker."""
        cdef bint progressed
        cdef bint blocked = False
        cdef object item
        if self.awaiting_ack:
            return self._ack_step()
        progressed = self._drain()
        while self.invocations and not self.finished:
            item = self.invocations[0]
            if item[0] == INVOKE:
                if not self.exiting and not self._ready(item[1], item[2], item[3]):
                    blocked = True
                    break
                self.invocations.popleft()
                self._react(item[1], item[2], _invoke_payload(item[3]))
            elif item[0] == STOP:
                self.invocations.popleft()
                self._stall_inbox(False)
                self._hand_over(item[1])
                self.awaiting_ack = True
                self._ack_step()
                return True
            else:
                self.invocations.popleft()
                self._age(item[1])
            progressed = True
        self._stall_inbox(blocked)
        if self.exiting:
            self.finished = True
        return progressed

    cdef bint _ready(self, int64_t index, int how, bytes frame) except *:
        """Whether every token invocation ``index`` reads is here (or will never come: its writer died)."""
        cdef Step step = <Step>self.reactions[(index - self.start) % self.period]
        cdef int64_t kind
        dead = self.dead
        for spec in step.specs:
            kind = spec[1]
            if kind == A_PERIOD:
                if (spec[2], index - spec[3]) not in self.buf and self.writers.get(spec[2]) not in dead:
                    return False
            elif kind == A_CONST:
                if (spec[2], spec[3]) not in self.consts and self.writers.get(spec[2]) not in dead:
                    return False
        if how == INVOKE_WITH_REFS:
            if self.lent_of is None or self.lent_of[0] != index:
                # (asked again each round until ready)
                self.lent_of = (index, _pickle_loads(_invoke_payload(frame))[3])
            for oid, conn, producer in self.lent_of[1]:
                if (conn, producer) not in self.buf and self.writers.get(conn) not in dead:
                    return False
        return True

    cdef bint _ack_step(self) except *:
        """Handed over: serve what comes until the driver's ACK (the calls held back run first)."""
        cdef bint progressed = False
        worker = self.worker
        self._read_inbox_stopped()
        while worker.running:
            msg = worker.next_deferred()
            if msg is None:
                return progressed
            progressed = True
            if msg.KIND == wire.REACTOR and msg.verb == "ack" and msg.body == self.program.plan:
                self.finished = True
                return True
            worker.handle_message(msg)
        self.finished = True
        return True

    def close(self):
        self._close()

    def freeze_what_stays_here(self):
        """Outputs that a reader in this process takes travel as themselves when they can (frozen tokens)."""
        frozen = set()
        for conn, route in self.routes.items():
            if route[0] or any(t in self.direct for t in route[1]):
                frozen.add(conn)
        self.host.frozen_conns = frozen


cdef class HostReactor:
    """One thread of a host process steps the replay reactors of all its guests, in turn, so that a call from
    one co-located actor to another is a function call on the same thread, and its token a reference::

        driver / other processes ──rings──▶ guest reactors' in-rings ──┐ (writers ring the host's
        a guest's inbound ring ──▶ its own thread pumps it (replies     │  stepping doorbell)
            delivered, the rest queued for the reactor) ── rings ──────▶│
                                                                       ▼
                     the stepping thread: each guest's WorkerReactor.step(), acting as that guest
                       co-hosted reader ◀── _emit hands the token over by reference (no ring, no wake)

    A guest's thread registers its reactor (``host_guest``) and then only pumps its inbound ring until the
    run is over for it; whatever ended the guest while stepped (exit_actor, a kill) is raised there, on its own
    thread, as it would have been without a host reactor.  A reaction that blocks (a nested ``ray.get``,
    ``time.sleep``, a full ring) lets the stepping thread step the host's other guests meanwhile
    (``step_while_waiting``), on top of its own frame: a guest stepped so that itself waits for the blocked
    one cannot finish before it, where threads of their own would (a known limit of sharing one thread)."""

    cdef object host
    cdef object bell
    cdef object poller
    cdef object waiter              # the doorbell alone: a nested wait must not wake for a blocked reactor's rings
    cdef tuple reactors             # replaced, never changed in place: a round iterates it while nested rounds edit
    cdef object pending
    cdef set busy
    cdef public object thread_ident

    def __init__(self, host, bell_path):
        self.host = host                 # hosting.Host: ``act_as(guest)``, ``flush_releases()``
        self.bell = channel.Doorbell(bell_path)
        self.bell.enter_active()         # (also tells the driver that this host has a stepping thread)
        self.poller = channel.Poller(self.bell)
        self.waiter = channel.Poller(self.bell)
        self.reactors = ()
        self.pending = collections.deque()
        self.busy = set()
        self.thread_ident = None

    def host_guest(self, worker, program):
        """(A guest's own thread) the guest's part of a run, stepped by this host's stepping thread; this
        thread pumps the guest's inbound ring meanwhile.  Returns when the run is over for the guest."""
        cdef WorkerReactor wr = WorkerReactor(worker, program, True)
        wr.stepper = self
        self.pending.append(wr)
        self.bell.ring()
        watch = channel.Poller(worker.bell)           # no rings: woken by the guest's doorbell only
        bell = worker.bell
        while not wr.released:
            seen = bell.sequence()
            if worker.pump_inbound():
                self.bell.ring()
            if wr.released:
                break
            watch.wait(1.0, False, seen)
            if os.getppid() == 1:
                os._exit(1)
        if wr.failure is not None:
            failure, wr.failure = wr.failure, None
            raise failure

    def serve(self):
        """(The host's stepping thread) forever: step every hosted reactor; sleep when none can go on."""
        import threading
        import traceback
        self.thread_ident = threading.get_ident()
        channel.count_awake_thread()
        while True:
            try:
                seen = self.bell.sequence()
                if not self._round() and not self.pending:
                    if refcount.released:
                        self.host.flush_releases()
                    self.poller.wait(1.0, False, seen)
                    if os.getppid() == 1:
                        os._exit(1)
            except BaseException:  # noqa: BLE001 - the host's other guests go on
                traceback.print_exc()

    def step_while_waiting(self, double timeout_s):
        """(The stepping thread, in a reaction that blocks) step the other guests once, or sleep until something
        comes (a reply to the blocked request rings too)."""
        seen = self.bell.sequence()
        if not self._round():
            self.waiter.wait(min(timeout_s, 0.05), False, seen)

    cdef bint _round(self) except *:
        cdef bint progressed = False
        cdef WorkerReactor wr
        while self.pending:
            self._add(self.pending.popleft())
            progressed = True
        for wr in self.reactors:
            # (one a nested round removed is stepped no more)
            if wr in self.busy or wr.released or wr.finished:
                continue
            if self._step(wr):
                progressed = True
        return progressed

    cdef bint _step(self, WorkerReactor wr) except *:
        cdef bint progressed = True
        cdef bint acking = wr.awaiting_ack
        self.busy.add(wr)
        acting = self.host.act_as(wr.worker)
        try:
            progressed = wr.step()
        except BaseException as exc:  # noqa: BLE001 - the guest's own thread raises it (GuestEnded, ...)
            wr.failure = exc
            wr.finished = True
        finally:
            self.host.act_as(acting)
            self.busy.discard(wr)
        if wr.finished:
            self._remove(wr)
        elif wr.awaiting_ack and not acking:
            self._watch()                 # (its other in-rings are closed now: frames left there stay unread)
        return progressed

    cdef void _add(self, WorkerReactor wr) except *:
        cdef WorkerReactor other
        for other in self.reactors:
            if other.plan != wr.plan:
                continue
            for i, name in enumerate(wr.out_readers):
                if name == other.name:
                    wr.direct[i] = other
            for i, name in enumerate(other.out_readers):
                if name == wr.name:
                    other.direct[i] = wr
            other.freeze_what_stays_here()
        wr.freeze_what_stays_here()
        self.reactors += (wr,)
        self._watch()

    cdef void _remove(self, WorkerReactor wr) except *:
        cdef WorkerReactor other
        if wr.released:
            return
        self.reactors = tuple(r for r in self.reactors if r is not wr)
        for other in self.reactors:
            gone = [i for i, r in other.direct.items() if r is wr]
            for i in gone:
                del other.direct[i]
            if gone:
                other.freeze_what_stays_here()
        wr.direct.clear()
        self._watch()
        try:
            wr.close()
        except BaseException as exc:  # noqa: BLE001 - (raised on the guest's thread, if nothing came first)
            if wr.failure is None:
                wr.failure = exc
        if not self.reactors and wr.program.dynamic_spin is not None:
            channel.set_spin_seconds(wr.program.dynamic_spin)
        wr.released = True
        wr.worker.bell.ring()             # its thread returns from host_guest

    cdef void _watch(self) except *:
        cdef WorkerReactor wr
        rings = []
        for wr in self.reactors:
            rings.extend(wr.in_rings[:1] if wr.awaiting_ack else wr.in_rings)
        self.poller.set_rings(rings)


def handle(worker, msg):
    """Entry point from the worker's message loop: ``wire.Reactor('start', program)``.

    Returns when the driver has stopped the plan (or the worker is exiting).  A
    stray 'ack' (its run already ended) needs nothing."""
    if msg.verb == "start":
        program = msg.body
        if program.host_bell is not None:
            worker.hosting().stepper(lambda host: HostReactor(host, program.host_bell)).host_guest(worker, program)
        else:
            WorkerReactor(worker, program).run()


# ====================================================================== the driver's hot path
CALL, PUT, GET, WAIT = 0, 1, 2, 3      # an Op's kind


def _unlink_handed(desc):
    if desc[0] == serialization.SEGMENT:
        try:
            os.unlink(desc[1])
        except OSError:
            pass


cdef class Op:
    """One position of the period as the driver runs it: what the guard expects there, and where the call
    goes.  core.replay_wiring compiles one per position from the plan; the DriverPath reads the fields
    directly, and the run's other parts by name (the one form of the driver's part of a plan).

    A *read* (``specs`` of a call's arguments, ``reads`` of a get or wait) is None for a literal argument,
    ``(connection, distance, ret, None)`` for a value made ``distance`` events before,
    ``(connection, None, ret, (token key, ref id))`` for a constant made before the period, or
    ``(relay connection, RELAYED, ret, None, position, its output connection)`` for a result of ``position``
    made any number of periods before (a loop in completion order: the driver relays its value)."""
    cdef public int kind
    cdef public int64_t position
    cdef public str label               # what explain() and deviation messages call it
    # calls
    cdef public object actor            # actor id, or replay_ops.TASK_CALLER for a task call site
    cdef public object method           # method name, or the task's guard target
    cdef public int nret
    cdef public int nargs
    cdef public tuple kwnames
    cdef public tuple specs
    cdef public object link             # replay_ops.Link of the worker it runs on
    cdef public object pool             # a pool's position: actor id -> the Link of each member; else None
    cdef public bint relayed            # its results are relayed by the driver to later calls (completion order)
    cdef public tuple outputs           # connection ids, one per return
    cdef public bint feeds_workers      # some output is read by a worker (not only by the driver)
    cdef public object inflight         # the link's deque of calls not yet known to have run (lent task workers,
                                        # actors with max_task_retries: their calls run again should they die)
    cdef public object worker_fed       # per argument, whether a worker makes it (None: none is)
    # gets and waits
    cdef public tuple reads
    cdef public bint timeout            # the script gave a timeout
    cdef public int num_returns
    # puts
    cdef public int conn
    cdef public tuple readers           # the links of the workers that read the put value

    def __init__(self, int kind, int64_t position):
        self.kind = kind
        self.position = position
        self.label = ""
        self.kwnames = self.specs = self.outputs = self.reads = self.readers = ()
        self.conn = -1
        self.pool = None
        self.relayed = False

_IMMUTABLE = frozenset([int, float, bool, str, bytes, type(None)])
_MEMO_ARRAY_BYTES = 64 * 1024


cdef bint _same_bytes(array, bytes data) except -1:
    """Whether a C-contiguous array's bytes equal ``data`` (compared in place: no copy per call)."""
    cdef Py_buffer view
    PyObject_GetBuffer(array, &view, PyBUF_SIMPLE)
    try:
        return view.len == len(data) and memcmp(view.buf, <const char*>data, view.len) == 0
    finally:
        PyBuffer_Release(&view)


cdef class LastLiterals:
    """Inline packs of literal arguments already pickled, for a next call passing the same, unchanged.

    Two ways a call's literals count as already pickled:

    - the very objects of the last call, each immutable or a small numeric array whose shape, dtype,
      strides and bytes are as they were when it was pickled (a script that sends one observation
      to N actors, ``[p.act.remote(obs) for p in ps]``, pickles it once, not N times; a script may
      change an array between two calls, so that is checked, not assumed);
    - literals that are all scalars (ints, floats, bools, None, short strings, numpy's own numeric
      scalar types) equal, type and bytes, to ones pickled before: an action drawn from a small set
      (``space.sample()``) is pickled once per distinct value, not once per call.  The pickling of a
      numpy scalar, with its by-name reconstructor, costs more than the rest of a replayed call.
    """
    cdef tuple values
    cdef list arrays                   # (array, its bytes, shape, strides, dtype) as pickled
    cdef bytes payload
    cdef dict by_value                 # _scalar_key(literals) -> their inline pack
    cdef object key                    # the last lookup's scalar key, for remember

    def __cinit__(self):
        self.by_value = {}

    cdef bytes lookup(self, list literals):
        cdef Py_ssize_t i, n = len(literals)
        self.key = None
        if self.payload is not None and n == len(self.values):
            for i in range(n):
                if literals[i] is not self.values[i]:
                    break
            else:
                for a, data, shape, strides, dtype in self.arrays:
                    if a.shape != shape or a.strides != strides or a.dtype != dtype or not _same_bytes(a, data):
                        break
                else:
                    return self.payload
        self.key = _scalar_key(literals)
        if self.key is None:
            return None
        return self.by_value.get(self.key)

    cdef void remember(self, list literals, bytes payload):
        if self.key is not None:
            if len(self.by_value) >= _SCALAR_PACKS:
                self.by_value.clear()      # (a script drawing from a large set gains nothing from keeping more)
            self.by_value[self.key] = payload
            self.key = None
        arrays = []
        self.payload = None
        np = sys.modules.get("numpy")
        for v in literals:
            t = type(v)
            if t in _IMMUTABLE or (np is not None and isinstance(v, (np.number, np.bool_))):
                continue
            if (np is None or t is not np.ndarray or not v.flags.c_contiguous
                    or v.dtype.kind not in "biufc" or v.nbytes > _MEMO_ARRAY_BYTES):
                return
            arrays.append((v, v.tobytes(), v.shape, v.strides, v.dtype))
        self.values = tuple(literals)
        self.arrays = arrays
        self.payload = payload

    cdef void clear(self):
        self.values = self.arrays = self.payload = self.key = None


_SCALAR_PACKS = 1024                   # distinct scalar literal lists whose packs are kept
_SHORT_STR = 64
_numpy_scalar_types = None


cdef object _scalar_key(list literals):
    """A key equal for two literal lists only if they pickle alike (exact types; floats and numpy scalars
    by their bytes, so 0.0 and -0.0 differ), or None if some literal is not such a scalar (ints past 64
    bits and long strings too: the packs kept stay small)."""
    global _numpy_scalar_types
    key = []
    for v in literals:
        t = type(v)
        if t is bool or v is None or (t is str and len(<str>v) <= _SHORT_STR) or \
                (t is int and v.bit_length() <= 64):
            key.append((t, v))
        elif t is float:
            key.append((t, _DOUBLE.pack(v)))
        else:
            if _numpy_scalar_types is None:
                np = sys.modules.get("numpy")
                if np is None:
                    return None
                # numpy's own numeric scalar types only: a subclass may carry more than its bytes
                _numpy_scalar_types = frozenset(t for t in set(np.sctypeDict.values())
                                                if np.dtype(t).kind in "biufc")
            if t not in _numpy_scalar_types or t in copyreg.dispatch_table:
                return None              # (one with a serializer the script registered pickles its own way)
            key.append((t, v.tobytes()))
    return tuple(key)


_DOUBLE = struct.Struct("<d")


cdef bint _calls(Op op, actor_id, method, tuple args, dict kwargs, int nret, ref_type):
    """Whether a call matches ``op``'s kind, actor (any member of a pool), method, arity, and where it passes a
    ref and where a value (what a block's beginning is told by: its refs are checked as the call goes on)."""
    if not (op.kind == CALL and (op.actor == actor_id or (op.pool is not None and actor_id in op.pool))
            and op.method == method and op.nret == nret and len(args) == op.nargs
            and (tuple(kwargs) if kwargs else ()) == op.kwnames):
        return False
    values = args if not kwargs else args + tuple(kwargs.values())
    for value, spec in zip(values, op.specs):
        if (type(value) is ref_type) != (spec is not None):
            return False
    return True


cdef class DriverPath:
    """The driver's per-call replay path: guard check, one frame, a light ref; gets read tokens directly.

    ``replay.ReplayRun`` owns it and handles everything rare (deviations, the period
    boundary's bookkeeping, deaths, notes, deoptimization); this class only runs
    what every call of a matching script runs, from ``ops``: an :class:`Op` per position (a put's is
    handled by the run).

    What it asks of its run, all public there: ``deviate``, ``deviate_call``, ``get_off_plan``, ``wait_off_plan``,
    ``begin_period``, ``relay``, ``relayable``,
    ``absorb_deaths``, ``reap_arg_files``, ``deopt_at_next_call``, ``worker_noted``, ``rerunnable_worker_lost``,
    and ``nested`` (core.replay_nested: a call's nested refs, and the store hook ``nested.came``);
    it reads ``dead_pending``, ``handed`` and ``reruns_due``, and names files after ``rt.session_prefix``.
    The run reaches only its ``cdef public`` attributes and its ``call``, ``get``, ``wait``, ``drain`` and
    ``write``.
    """
    cdef public object run
    cdef public dict given
    cdef public dict cache
    cdef public object windows
    cdef public list ops
    cdef public int64_t idx
    cdef public int64_t start
    cdef public int64_t period
    cdef public int64_t first
    cdef public list outs
    cdef public Gather gather
    cdef public double spin
    cdef public object const_conns
    cdef public dict dead_payloads
    cdef public dict writer_of
    cdef public object driver_log
    cdef public object dead_pending
    cdef public object poller
    cdef public object handed
    cdef object ref_type
    cdef object new_id
    cdef object deopt
    cdef LastLiterals last_literals
    cdef public set cancelled          # results of actor calls ray.cancel named before they finished
    cdef public int64_t skipped        # positions the script went on without: the plan's reads (skip_reads), and
                                       # the positions of the blocks it did not take (_skip_to_block)
    cdef public set forgotten          # (conn, index) of results for the driver whose refs died before they came
    cdef public dict adopting          # (conn, index) -> the id the dynamic table waits for (replay_nested)
    # Loops in completion order (plan pools): who made each pooled result, and the refs a relay may name.
    cdef public dict pool_writer       # trace index of a pooled call -> the member's reactor name
    cdef public frozenset pool_names   # writer_of's names for a pool (the writer is then per index)
    cdef public dict made              # ref id -> (index, ret) of the results of relayed positions
    cdef public dict made_before       # ref id -> (index, ret, position) of those made before the run
    cdef public frozenset block_starts # a loop of blocks in any order (Plan.blocks): where each block begins
    cdef public frozenset lend_positions  # calls that read a put nesting refs: lent them (replay_nested)

    def __init__(self, run, ops, int64_t start, int64_t period, int64_t first, outs, Gather gather, double spin,
                 const_conns, writer_of, ref_type, new_id, deopt, poller):
        self.run = run
        self.ops = list(ops)
        self.start = start
        self.period = period
        self.first = first
        self.idx = first
        self.given = {}
        self.cache = {}
        self.windows = collections.deque()
        self.outs = list(outs)
        self.gather = gather
        self.spin = spin
        self.const_conns = const_conns
        self.dead_payloads = {}
        self.writer_of = writer_of
        self.driver_log = collections.deque(maxlen=20000)
        self.dead_pending = run.dead_pending
        self.handed = run.handed
        self.ref_type = ref_type
        self.new_id = new_id
        self.deopt = deopt
        self.poller = poller
        self.last_literals = LastLiterals()
        self.cancelled = set()
        self.skipped = 0
        self.forgotten = set()
        self.adopting = {}
        self.pool_writer = {}
        self.pool_names = frozenset()
        self.made = {}
        self.made_before = {}
        self.block_starts = frozenset()
        self.lend_positions = frozenset()

    # ------------------------------------------------------------------ calls
    cdef object _literal_frame(self, list literals, int64_t idx, link):
        """The invoke frame carrying ``literals``, inline or in a segment; None if they nest refs other than
        the plan's here (``run.nested`` builds the frame of those that nest the plan's).

        Packed as dynamic submission packs ``(args, kwargs)``: a big array passed before and
        during replay is then the same pack, which the snapshot cache links, not copies."""
        ser = serialize((tuple(literals), {}))
        if ser.contained:
            return self.run.nested.frame(idx, literals, ser, link)
        if ser.size <= serialization.INLINE_LIMIT:
            payload = ser.pack()
            self.last_literals.remember(literals, payload)
            return INVOKE_HEADER.pack(INVOKE, idx, 1) + payload
        self.last_literals.clear()
        # Recycle the files of arguments already consumed first: a big write then lands in warm pages.
        self.run.reap_arg_files()
        path = f"{self.run.rt.session_prefix}-ra{self.new_id().hex()}"
        ser.write_segment(path)
        link.arg_files.append((idx, path))
        return INVOKE_HEADER.pack(INVOKE, idx, 2) + path.encode()

    cpdef int skip_reads(self) except -1:
        """The script goes on without the plan's read here (a read changes nothing the workers do): move
        past the plan's reads to its next call or put.  Returns 1 if that began a period, else 0."""
        cdef int64_t idx = self.idx
        cdef int64_t q
        cdef bint began = False
        cdef Op op = <Op>self.ops[(idx - self.start) % self.period]
        while op.kind == GET or op.kind == WAIT:
            idx += 1
            self.skipped += 1
            q = (idx - self.start) % self.period
            self.idx = idx
            if q == 0:
                self.run.begin_period(idx)
                began = True
            op = <Op>self.ops[q]
        return began

    cdef int _skip_to_block(self, actor_id, method, tuple args, dict kwargs, int nret) except -1:
        """A call that begins another block than the one here: move to that block's beginning, in this period
        or the next (the positions between are never invoked: no worker waits for them, and the guard of a
        ref to what they would have made finds no such ref).  Returns 1 if that began a period, else 0."""
        cdef int64_t idx = self.idx
        cdef int64_t q = (idx - self.start) % self.period
        cdef int64_t p, ahead, period_start
        for p in sorted(self.block_starts):
            if p != q and _calls(<Op>self.ops[p], actor_id, method, args, kwargs, nret, self.ref_type):
                break
        else:
            return 0                          # no block begins so: the caller deviates
        ahead = p - q if p > q else self.period - q + p
        period_start = idx + (self.period - q) % self.period     # the next period's first index (idx itself at 0)
        self.idx = idx + ahead
        self.skipped += ahead
        if period_start < idx + ahead and period_start != self.first:
            self.run.begin_period(period_start)
            return 1
        return 0

    def call(self, actor_id, method, tuple args, dict kwargs, int nret):
        cdef int64_t idx = self.idx
        cdef int64_t q = (idx - self.start) % self.period
        cdef Op op = <Op>self.ops[q]
        cdef tuple spec, const
        cdef int64_t p
        cdef dict given = self.given
        cdef Py_ssize_t i, n
        cdef int began = 0
        if op.kind == GET or op.kind == WAIT:
            began = self.skip_reads()
            idx = self.idx
            q = (idx - self.start) % self.period
            op = <Op>self.ops[q]
        if self.block_starts and q in self.block_starts and not _calls(op, actor_id, method, args, kwargs, nret,
                                                                       self.ref_type):
            began |= self._skip_to_block(actor_id, method, args, kwargs, nret)
            idx = self.idx
            q = (idx - self.start) % self.period
            op = <Op>self.ops[q]
        link = op.link
        expected = op.actor
        if op.pool is not None and op.kind == CALL:
            link = op.pool.get(actor_id)
            if link is not None:
                expected = actor_id                 # any member will do
        if (op.kind != CALL or expected != actor_id or op.method != method or op.nret != nret
                or len(args) != op.nargs or (tuple(kwargs) if kwargs else ()) != op.kwnames):
            return self.run.deviate_call(actor_id, method, _call_difference(op, actor_id, method, args, kwargs, nret))
        values = args if not kwargs else args + tuple(kwargs.values())
        relays = None
        specs = op.specs
        ref_type = self.ref_type
        literals = []
        n = len(specs)
        for i in range(n):
            value = values[i]
            s = specs[i]
            if s is None:
                if type(value) is ref_type:
                    return self.run.deviate_call(actor_id, method, "with a ref where a value was passed")
                literals.append(value)
                continue
            spec = <tuple>s
            if type(value) is not ref_type:
                return self.run.deviate_call(actor_id, method, "with a value where a ref was passed")
            const = spec[3]
            if const is None:
                if <int64_t>spec[1] == C_RELAYED:
                    made = self.made.get(value._id)
                    made_from = spec[5]
                    if made is not None:
                        p = (<int64_t>made[0] - self.start) % self.period
                        if <int64_t>spec[4] == C_ANY_POSITION:
                            made_from = (<Op>self.ops[p]).outputs[made[1]]     # (whichever call made it)
                        elif made[1] != spec[2] or p != <int64_t>spec[4]:
                            return self.run.deviate_call(actor_id, method, "with another ref")
                    else:
                        # (index, ret, the position it stands for): made before the run, or any ready value of the
                        # dynamic table (the relay sends exactly the value the ref names)
                        made = self.made_before.get(value._id)
                        if made is None and self.run.relayable(value._id, spec[2], spec[4]):
                            made = self.made_before.get(value._id)
                        if made is None or (<int64_t>spec[4] != C_ANY_POSITION
                                            and (made[1] != spec[2] or made[2] != spec[4])):
                            return self.run.deviate_call(actor_id, method, "with another ref")
                    if relays is None:
                        relays = []
                    relays.append((spec[0], made_from, made[0], value._id, <int64_t>spec[4] == C_ANY_POSITION))
                elif given.get((idx - <int64_t>spec[1], spec[2])) != value._id:
                    return self.run.deviate_call(actor_id, method, "with another ref")
            elif const[1] != value._id:
                return self.run.deviate_call(actor_id, method, "with another ref")
        if relays is not None and not self.run.relay(link, idx, relays):
            return self.run.deviate_call(actor_id, method, "with a result not ready yet (it would wait for it)")
        if q == 0 and idx != self.first and not began:
            self.run.begin_period(idx)
        if self.lend_positions and (idx - self.start) % self.period in self.lend_positions:
            frame = self.run.nested.frame(idx, literals, serialize((tuple(literals), {})), link)
            if frame is None:
                return self.run.deviate_call(actor_id, method, "reading a put that nests refs this run did not make")
        elif literals:
            payload = self.last_literals.lookup(literals)
            if payload is not None:
                frame = INVOKE_HEADER.pack(INVOKE, idx, 1) + payload
            else:
                frame = self._literal_frame(literals, idx, link)
                if frame is None:
                    return self.run.deviate_call(actor_id, method,
                                                 "with refs nested in an argument that are not the plan's")
        else:
            frame = INVOKE_HEADER.pack(INVOKE, idx, 0)
        inflight = op.inflight
        if inflight is not None:
            # A task reactor or a retried actor: what it takes to run this call again, should its worker die
            # first (Ray retries).
            # The script's refs to values the driver holds keep them; of one a worker makes only the id is
            # kept, and the value fetched if needed (its ref would oblige the driver to keep a value it never
            # sees).
            if op.worker_fed is not None:
                values = tuple([v._id if fed else v for v, fed in zip(values, op.worker_fed)])
            inflight.append((idx, frame, values))
        self.idx = idx + 1
        self.write(link, frame, True)
        windows = self.windows
        window = windows[len(windows) - 1][1]
        outputs = op.outputs
        new_id = self.new_id
        if op.pool is not None:
            self.pool_writer[idx] = link.name
        if nret == 1:
            oid = new_id()
            given[(idx, 0)] = oid
            window.append((idx, 0, outputs[0]))
            if op.relayed:
                self.made[oid] = (idx, 0)
            return ref_type(oid)
        refs = []
        for i in range(nret):
            oid = new_id()
            given[(idx, i)] = oid
            window.append((idx, i, outputs[i]))
            if op.relayed:
                self.made[oid] = (idx, i)
            refs.append(ref_type(oid))
        return refs if nret else None

    # ------------------------------------------------------------------ gets and waits
    cdef list _match(self, tuple reads, object_ids):
        cdef int64_t idx = self.idx
        cdef dict given = self.given
        cdef list keys = []
        cdef tuple r
        cdef Py_ssize_t i
        for i in range(len(reads)):
            r = <tuple>reads[i]
            oid = object_ids[i]
            if r[3] is None:
                producer = idx - <int64_t>r[1]
                if given.get((producer, r[2])) != oid:
                    return None
                keys.append((r[0], producer))
            else:
                if r[3][1] != oid:
                    return None
                keys.append(r[3][0])
        return keys

    def get(self, object_ids, timeout):
        cdef int64_t idx = self.idx
        cdef int64_t q = (idx - self.start) % self.period
        cdef Op op = <Op>self.ops[q]
        cdef Token tok
        if op.kind != GET or len(object_ids) != len(op.reads) or op.timeout != (timeout is not None):
            return self.run.get_off_plan(object_ids, timeout, _get_difference(op, object_ids, timeout))
        keys = self._match(op.reads, object_ids)
        if keys is None:
            return self.run.get_off_plan(object_ids, timeout,
                                         "a get of other refs than the plan's (not the results it expects here)")
        if q == 0 and idx != self.first:
            self.run.begin_period(idx)
        self.idx = idx + 1
        cdef double t0 = monotonic_s()
        tokens = self.collect(keys, timeout, len(keys))
        if tokens is None:
            return self._lost_task()
        self.driver_log.append((idx, t0, monotonic_s()))
        out = []
        cancelled = self.cancelled
        cdef Py_ssize_t i
        for i in range(len(tokens)):
            t = tokens[i]
            if t is None:
                raise exceptions.GetTimeoutError(f"Get timed out: some object(s) not ready after {timeout} s.")
            if cancelled and object_ids[i] in cancelled:
                raise exceptions.TaskCancelledError()
            tok = <Token>t
            value = tok.value()
            if tok.flags & F_ERROR:
                from .submission import raisable
                raise raisable(value)
            out.append(value)
        return out

    def wait(self, object_ids, int num_returns, timeout):
        cdef int64_t idx = self.idx
        cdef int64_t q = (idx - self.start) % self.period
        cdef Op op = <Op>self.ops[q]
        if (op.kind != WAIT or len(object_ids) != len(op.reads) or op.num_returns != num_returns
                or op.timeout != (timeout is not None)):
            return self.run.wait_off_plan(object_ids, num_returns, timeout,
                                          _wait_difference(op, object_ids, num_returns, timeout))
        keys = self._match(op.reads, object_ids)
        if keys is None:
            return self.run.wait_off_plan(object_ids, num_returns, timeout,
                                          "a wait on other refs than the plan's (not the results it expects here)")
        if q == 0 and idx != self.first:
            self.run.begin_period(idx)
        self.idx = idx + 1
        cdef double t0 = monotonic_s()
        tokens = self.collect(keys, timeout, num_returns)
        if tokens is None:
            return self._lost_task()
        self.driver_log.append((idx, t0, monotonic_s()))
        return [t is not None for t in tokens]

    cdef object _lost_task(self):
        self.run.rerunnable_worker_lost()
        return self.deopt

    def known(self, key):
        """The token of ``key`` if the driver has it (or its writer died: the death error), else None."""
        return self._token(key)

    cdef object _token(self, key):
        tok = self.cache.get(key)
        if tok is not None:
            return tok
        writer = self.writer_of.get(key[0])
        if self.pool_names and writer in self.pool_names:
            writer = self.pool_writer.get(key[1])
        payload = self.dead_payloads.get(writer)
        if payload is not None:
            tok = Token(F_ERROR, payload)
            self.cache[key] = tok
            return tok
        return None

    def collect(self, list keys, timeout, int need):
        """Wait until ``need`` of ``keys`` have tokens (or ``timeout``): one wake per gather, not per token."""
        cdef double deadline = -1.0 if timeout is None else monotonic_s() + timeout
        cdef double remaining
        cdef int have
        cdef uint32_t seen
        while True:
            if self.dead_pending:
                self.run.absorb_deaths()
                if self.run.reruns_due:
                    return None
            tokens = [self._token(k) for k in keys]
            have = 0
            for t in tokens:
                if t is not None:
                    have += 1
            if have >= need:
                self.run.reap_arg_files()
                return tokens
            seen = load_u32(self.gather.arrived)
            if self.drain():
                continue
            remaining = 0.5 if deadline < 0 else min(0.5, deadline - monotonic_s())
            if remaining <= 0:
                return tokens
            self.gather.wait(seen + <uint32_t>(need - have), remaining, min(self.spin, channel.spin_now()))
            self._check_signals()

    cdef void _check_signals(self) except *:
        """Ctrl-C while the driver waits raises here (compiled loops check no signals by themselves); the run
        then ends at the script's next call, whatever it does after catching it."""
        try:
            PyErr_CheckSignals()
        except BaseException:
            self.run.deopt_at_next_call("the script was interrupted (a signal) during a replayed call")
            raise

    # ------------------------------------------------------------------ rings
    cpdef bint drain(self) except *:
        """Read every frame on the workers' rings to the driver into the cache."""
        cdef bint progressed = False
        cdef int kind
        for link, ring in self.outs:
            while True:
                frame = ring.read()
                if frame is None:
                    break
                progressed = True
                kind = frame[0]
                if kind == TOKEN:
                    conn, index, tok = decode_token(frame, True)
                    self._store(conn, index, tok)
                elif kind == HANDOVER:
                    key, desc = parse_control(frame)
                    if key in self.handed or key in self.cache:
                        _unlink_handed(desc)       # handed twice (a FETCH and a STOP's list): keep one
                    else:
                        self.handed[key] = desc
                elif kind == STOPPED:
                    link.stopped = True
                elif kind == NOTE:
                    self.run.worker_noted(parse_control(frame))
        return progressed

    cdef void _store(self, conn, int64_t index, Token tok) except *:
        if self.adopting:
            oid = self.adopting.pop((conn, index), None)
            if oid is not None:
                # A callee may be waiting for it in the dynamic table, whatever the driver's own refs do.
                self.run.nested.came(oid, tok)
        windows = self.windows
        if windows and index < windows[0][0] and conn not in self.const_conns:
            tok.free()                     # nobody can name it any more
            return
        key = (conn, index)
        if self.forgotten and key in self.forgotten:
            self.forgotten.discard(key)    # its ref died before it came (begin_period let it go)
            tok.free()
            return
        old = self.cache.get(key)
        if old is not None:
            (<Token>old).free()
        self.cache[key] = tok

    cpdef bint write(self, link, frame, bint invocation=False) except *:
        """Write to a worker's inbox; while it is full, keep reading our own rings (no cycle can block).  An
        ``invocation`` wakes its reader only if it waits for invocations (one waiting for tokens reads it when
        they come: ``Ring.set_stalled``)."""
        ring = link.inbox
        if ring.try_write(frame):
            if not invocation or ring.wake_wanted():
                link.bell.ring()
            return True
        ring.want_space(True)
        link.bell.ring()        # (a reader stalled for tokens was not woken for what fills its ring: it reads now)
        try:
            while not ring.try_write(frame):
                if link.dead or link.w.dead:
                    return False
                if not self.drain():
                    self.poller.wait(0.05)
                    self._check_signals()
        finally:
            ring.want_space(False)
        link.bell.ring()
        return True

