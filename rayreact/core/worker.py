"""The worker process: executes tasks or hosts one actor; serves nested API calls through the driver.

::

    driver ──ring D→W──▶ reader loop ──▶ run task / actor method   (sync: inline, in order)
                              │      └──▶ thread pool                (max_concurrency > 1)
                              │      └──▶ asyncio loop thread        (async actors)
                              └── REPLY ──▶ waiting nested get/wait
    driver ◀──ring W→D── DONE / REQUEST / RELEASE   (one writer lock: executor threads share it)

The reader loop is the only consumer of the inbound ring.  A sync task that
calls ``get`` pumps the ring itself (calls that arrive meanwhile are queued
and run afterwards, preserving order); other threads wait on an event the
reader sets.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import os
import select
import signal
import sys
import threading
import time
import traceback

from .. import exceptions
from . import channel, context, executor, handles, hosting, ids, wire, refcount, serialization
from .serialization import INLINE, SEGMENT
from .handoff import handoff
from .spilling import spilling
from .proctitle import encode as _title, set_title

# Set by exit_actor() in the call (thread or asyncio task) that made it: that call reports the actor's death.
_exit_called_here = contextvars.ContextVar("rayreact_exit_called_here", default=False)
GRACEFUL_SHUTDOWN_S = 30.0       # Ray's actor_graceful_shutdown_timeout_ms: a cleanup that hangs is cut off

_IDLE_TITLE = _title("ray::IDLE")     # Ray's titles: ray::IDLE, ray::<task>, ray::<Actor>, ray::<Actor>.<method>


class _ArgRef:
    """Placeholder for an ObjectRef passed directly as an argument; the value replaces it at run time."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        return (_ArgRef, (self.index,))


serialization.register_simple_type(_ArgRef)


class _LinePrefixer:
    """Worker stdout/stderr: prefix each line like Ray, ``(Name pid=123) ...``, write straight to the fd."""

    def __init__(self, fd, worker):
        self._fd = fd
        self._worker = worker
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text):
        if not text:
            return 0
        with self._lock:
            data = self._partial + text
            lines = data.split("\n")
            self._partial = lines.pop()
            if lines:
                prefix = f"({self._worker.display_name} pid={os.getpid()}) "
                self._write_lines([prefix + line + "\n" for line in lines])
        return len(text)

    def _write_lines(self, lines):
        # The driver reads fds 1 and 2 of every worker from one pipe each (core.worker_logs): writes of at
        # most PIPE_BUF bytes are atomic there, so batch whole lines up to that size.
        batch, size = [], 0
        for line in lines:
            data = line.encode("utf-8", "replace")
            if batch and size + len(data) > select.PIPE_BUF:
                self._write(b"".join(batch))
                batch, size = [], 0
            batch.append(data)
            size += len(data)
        if batch:
            self._write(b"".join(batch))

    def _write(self, data):
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError:
            pass

    def flush(self):
        with self._lock:
            if self._partial:
                prefix = f"({self._worker.display_name} pid={os.getpid()}) "
                self._write_lines([prefix + self._partial + "\n"])
                self._partial = ""

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    @property
    def encoding(self):
        return "utf-8"


def run_forked(spec):
    """Entry point in a freshly forked worker."""
    ids.reseed()
    refcount.reset()
    channel.set_spin_seconds(spec.get("spin", 50e-6))
    os.environ.update(spec.get("env", {}))
    for key in spec.get("unset_env", ()):
        os.environ.pop(key, None)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()    # as in a new process: forked workers would all draw the zygote's numbers
    worker = Worker(spec)
    shown = worker          # whose name prefixes output lines: in a host, the guest that printed them
    if worker.kind == "host":
        shown = worker.host_of_guests().router
    signal.signal(signal.SIGINT, worker._on_sigint)
    set_title(_IDLE_TITLE)
    if spec.get("log_to_driver", True):
        sys.stdout = _LinePrefixer(1, shown)
        sys.stderr = _LinePrefixer(2, shown)
    else:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    try:
        worker.serve()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


class _DriverApi(context.RuntimeHooks):
    """The API surface a worker serves to the user's code: each call is a request to the driver (nested
    ``get``, ``.remote()``, ``put``...).  Kept apart from :class:`Worker`, which runs the calls."""

    def request(self, verb, payload, timeout=None):
        """Send a request and wait for its reply (the reader thread pumps; others wait on an event)."""
        self._req_counter += 1
        req_id = (threading.get_ident(), self._req_counter)
        on_reader = threading.current_thread() is self._reader_thread
        slot = [None if on_reader else threading.Event(), None, False]
        self._pending_replies[req_id] = slot
        self.send(wire.Request(req_id, verb, payload))
        deadline = None if timeout is None else time.monotonic() + timeout
        hosting = self.host or self._hosting
        let_go = hosting is not None and hosting.baton.let_go(self)    # (others run while this waits)
        try:
            while not slot[2]:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self.send(wire.Request(None, wire.V_CANCEL_GET, req_id))
                    raise exceptions.GetTimeoutError(f"Get timed out: some object(s) not ready after {timeout} s.")
                if on_reader:
                    raw = self._inbound.read()
                    if raw is None:
                        self.flush_releases()
                        self._poller.wait(min(remaining, 1.0) if remaining is not None else 1.0)
                        continue
                    msg = wire.decode(raw)
                    if self._took_at_once(msg):
                        continue
                    if msg.KIND == wire.DROP:
                        self._give_back(msg.task_id)       # a task sent behind this blocked one: let another run it
                    elif self._pool is not None or self._loop is not None:
                        self.handle_message(msg)
                    else:
                        self._deferred.append(msg)
                else:
                    stepper = hosting.stepper_here() if hosting is not None else None
                    if stepper is not None:      # (the host's other guests go on while this reaction waits)
                        stepper.step_while_waiting(min(remaining, 1.0) if remaining is not None else 1.0)
                    else:
                        slot[0].wait(min(remaining, 1.0) if remaining is not None else 1.0)
            return slot[1]
        finally:
            self._pending_replies.pop(req_id, None)
            if let_go:
                hosting.baton.take(self)

    def post(self, verb, payload):
        """A request with no reply (submissions: FIFO order makes them visible before any later get)."""
        self.send(wire.Request(None, verb, payload))

    def _deliver_reply(self, req_id, payload):
        slot = self._pending_replies.get(req_id)
        if slot is None:
            return
        slot[1] = payload
        slot[2] = True
        if slot[0] is not None:
            slot[0].set()

    # The API surface used by rayreact._api when running inside a worker.
    def submit_task(self, remote_function, args, kwargs, options):
        from . import submission
        return submission.submit_task_from_worker(self, remote_function, args, kwargs, options)

    def create_actor(self, actor_class, args, kwargs, options):
        from . import handles, submission
        handle = submission.create_actor_from_worker(self, actor_class, args, kwargs, options)
        if handle._ray_original:
            self._received[handles.key_of(handle._actor_id)] += 1   # the driver counts us as its first holder
        return handle

    def submit_actor_call(self, handle, info, args, kwargs, num_returns):
        from . import submission
        return submission.submit_call_from_worker(self, handle, info, args, kwargs, num_returns)

    def put(self, value):
        from .refs import ObjectRef
        oid = ids.new_id()
        desc = self.store_value(oid, value)
        self.post(wire.V_PUT, (oid, desc))
        self._received[oid] += 1
        return ObjectRef(oid)

    @staticmethod
    def _replayed_value(tok):
        value = tok.value()
        if tok.is_error:
            raise _as_raisable(value)
        return value

    def received(self, oids):
        """The driver lent us these refs (counted as shipped here): each is given back once dropped."""
        for oid in oids:
            self._received[oid] += 1

    def stream_next(self, stream_id, index, timeout, peek=False):
        kind, oid = self.request(wire.V_STREAM_NEXT, (stream_id, index, peek), timeout)
        if kind == "item" and not peek:
            self._received[oid] += 1
        return kind, oid

    def stream_drop(self, stream_id, index):
        self.post(wire.V_STREAM_DROP, (stream_id, index))

    def get_values(self, object_ids, timeout):
        lent = self.replay_values
        if lent and all(oid in lent for oid in object_ids):
            return [self._replayed_value(lent[oid]) for oid in object_ids]
        descs = self.request(wire.V_GET, (object_ids, timeout), timeout)
        out = []
        for desc in descs:
            value, is_error = self._descriptor_value(desc)
            if is_error:
                raise _as_raisable(value)
            out.append(value)
        return out

    def wait_ids(self, object_ids, num_returns, timeout, fetch_local):
        return self.request(wire.V_WAIT, (object_ids, num_returns, timeout), None)

    def kill_actor(self, actor_id, no_restart):
        self.request(wire.V_KILL, (actor_id, no_restart))

    def cancel(self, object_id, force, recursive):
        self.request(wire.V_CANCEL, (object_id, force, recursive))

    def get_actor_info(self, name, namespace):
        return self.request(wire.V_GET_ACTOR, (name, namespace if namespace is not None else self.namespace))

    def resources(self, which):
        return self.request(wire.V_RESOURCES, which)

    def list_named_actors(self, all_namespaces):
        return self.request(wire.V_NAMED_LIST, (all_namespaces, self.namespace))

    def placement_group_call(self, verb, payload):
        return self.request(wire.V_PG, (verb, payload))

    def current_actor_handle(self):
        class_name, methods = self.actor_handle_info[:2]
        return handles.new_handle(self.actor_id, class_name, methods, weak=True)   # as in Ray, it keeps nothing alive

    def get_gpu_ids(self):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if not visible:
            return []
        return [int(x) if x.isdigit() else x for x in visible.split(",") if x]

    # ---------------------------------------------------------------- runtime protocol (core.runtime_api)
    # The rest of RuntimeAPI: the methods above, and what core.runtime_api.RuntimeBase shares.
    actor_name = None        # set when this worker becomes a named actor

    def runtime_info(self):
        from .runtime_api import RuntimeInfo
        return RuntimeInfo(job_id=self.job_id, node_id=self.node_id, namespace=self.namespace,
                           task_id=self.current_task_id, actor_id=self.actor_id, actor_name=self.actor_name,
                           placement_group=self.current_pg, assigned_resources=self.assigned_resources,
                           is_actor=self.is_actor)

    def request_actor_exit(self):
        if not self.is_actor:
            raise TypeError("exit_actor API is called on a non-actor worker.")
        self.request_exit()
        return self.is_asyncio_actor

    def timeline_events(self):
        """The timeline is the driver's (its reactor's runs): a worker has no events of its own."""
        return []

    def finish_submitted(self, timeout):
        """Nothing to wait for here: what this process submitted is the driver's to finish."""
        return 0

    def shutdown(self):
        """A documented no-op: the session belongs to the driver, and ``ray.shutdown()`` in a task or actor
        leaves it running."""


class Worker(_DriverApi):
    """This process's runtime: ``context.current`` inside a worker."""

    is_driver = False
    local_mode = False

    def __init__(self, spec, host=None):
        self.spec = spec
        self.host = host                 # the hosting.Host this guest worker runs in (co-location), or None
        self._hosting = None             # a host process's own worker: its hosting.Host
        self.index = spec["worker_index"]
        self.kind = spec["kind"]
        self.session = spec["session"]
        self.shm_dir = spec["shm_dir"]
        self._message_prefix = os.path.join(self.shm_dir, f"rr-{self.session}-w{spec['worker_index']}")
        self.namespace = spec.get("namespace")
        self.job_id = spec.get("job_id", b"\x01\x00\x00\x00")
        self.node_id = spec.get("node_id", b"")
        self.display_name = spec.get("display_name", "Worker")
        self.is_actor = False
        self.actor_id = None
        self.actor_instance = None
        self.actor_handle_info = None
        self.current_task_id = None
        self._cancelled_calls = set()    # actor calls ray.cancel named (a call's id goes when it ends)
        self._async_calls = {}           # task id -> the asyncio task of an async actor's running call
        self.current_task_name = None
        self._in_task = False        # a task's arguments or user code run now: SIGINT (cancel) interrupts them
        self._replayed_invocation = -1   # the replayed invocation _in_task belongs to (-1: a dynamic task)
        self.assigned_resources = {}
        self.gpu_ids = []
        self.exit_requested = False
        self._exit_lock = threading.Lock()
        self._bell = channel.Doorbell(spec["worker_bell"])
        self._bell.enter_active()
        driver_bell = channel.Doorbell(spec["driver_bell"])
        channel.count_awake_on(driver_bell, True)   # (a guest's thread counts too: its waits subtract it)
        if host is None:                 # (once per process: a guest's host did it)
            spilling.configure(self.shm_dir, spec.get("spill_dir"), spec.get("store_limit", 0),
                               channel.store_used_published)
            handoff.start(self.shm_dir, self.session)
        self._inbound = channel.Ring(spec["to_worker"])
        self._inbound.writer_bell = driver_bell
        self._outbound = channel.Ring(spec["from_worker"])
        self._outbound.reader_bell = driver_bell
        self._poller = channel.Poller(self._bell)
        self._poller.set_rings([self._inbound])
        self._send_lock = threading.Lock()
        self._reader_thread = threading.current_thread()
        self._code = {}
        self._pending_replies = {}   # req_id -> [event or None, payload]
        self._deferred = collections.deque()
        self._req_counter = 0
        self._segments = serialization.SegmentCache()
        self._received = collections.Counter()   # refs the driver counted as shipped to us
        # The running replayed call's values lent to it as refs, by id (core.replay_nested): its gets read them here.
        self.replay_values = {}
        self._pool = None
        self._loop = None
        self._running = True
        self.stopping = False           # (a guest) killed: it runs no more calls, only reads on to its Exit
        self._max_concurrency = 1
        self.current_pg = None       # (placement group hex id, capture child tasks) of the running task/actor
        self._tracer = None
        if os.environ.get("RAYREACT_TRACE"):
            from .tracing import Tracer
            self._tracer = Tracer.from_environment()
        if host is None:
            context.current = self

    def host_of_guests(self):
        """A host process's worker: the hosting.Host of its guests (made once; it routes the API by thread)."""
        if self._hosting is None:
            self._hosting = hosting.Host(self)
            context.current = self._hosting.router
        return self._hosting

    def hosting(self):
        """The hosting.Host of this process (a guest's, or a host's own), or None outside hosts."""
        if self.host is not None:
            return self.host
        return self.host_of_guests() if self.kind == "host" else None

    def has_received(self, oid):
        """Whether the driver lent us refs to ``oid`` that we have not given back."""
        return oid in self._received

    def take_received(self, oid):
        """How many refs to ``oid`` the driver lent us, forgotten now (they are being given back)."""
        return self._received.pop(oid, 0)

    # ---------------------------------------------------------------- transport
    def send(self, msg):
        data = wire.encode(msg, self._outbound.max_message, self._message_prefix)
        with self._send_lock:
            while not self._outbound.write(data, 1.0):
                if self._outbound.is_closed():
                    if self.host is not None:
                        raise hosting.GuestEnded(1)
                    os._exit(1)

    def flush_releases(self):
        if self.host is not None or self._hosting is not None:
            (self.host or self._hosting).flush_releases()     # the process's drops, for every worker in it
            return
        released = refcount.drain_released()
        if not released:
            return
        batch = []
        for oid in released:
            if refcount.counts.get(oid):
                continue  # re-acquired meanwhile
            n = self._received.pop(oid, 0)
            batch.append((oid, n))
        if batch:
            self.send(wire.Release(batch))

    @staticmethod
    def _pin_nested(results):
        """Keep refs and actor handles nested in results counted here until the results are reported.

        The call's value is dropped before its report is sent; if another thread flushed the releases
        meanwhile, the driver would free what the report still names.
        """
        nested = [c for _, desc in results for c in desc[2]]
        for c in nested:
            refcount.incref(c)
        return nested

    @staticmethod
    def _unpin(nested):
        for c in nested:
            refcount.decref(c)

    def next_message(self, block=True):
        while True:
            if self._deferred:
                return self._deferred.popleft()
            raw = self._inbound.read()
            if raw is not None:
                return wire.decode(raw)
            if not block:
                return None
            self.flush_releases()
            handoff.idle()
            self._poller.wait(1.0)
            if os.getppid() == 1:
                os._exit(1)
            if self.exit_requested:
                self.exit_now()

    # ---------------------------------------------------------------- main loop
    def serve(self):
        self.send(wire.Ready(os.getpid()))
        while self._running:
            msg = self.next_message()
            self.handle_message(msg)

    def handle_message(self, msg):
        kind = msg.KIND
        if kind == wire.CALL:
            self._dispatch_call(msg)
        elif kind == wire.RUN_TASK:
            self._run_task(msg)
        elif kind == wire.DEFINE:
            self._code[msg.code_id] = msg.code
        elif kind == wire.REPLY:
            self._deliver_reply(msg.req_id, msg.payload)
        elif kind == wire.CREATE:
            self._create_actor(msg)
        elif kind == wire.EXIT:
            self._running = False
            self._shutdown_executors()
            self.send(wire.Exiting("exit"))
            if msg.graceful and self.is_actor:      # out of scope: ends gracefully, as in Ray
                self._graceful_cleanup()
        elif kind == wire.CANCEL:
            self._on_cancel(msg.task_id)
        elif kind == wire.DROP:
            self._give_back(msg.task_id)
        elif kind == wire.REACTOR:
            from . import reactor
            reactor.handle(self, msg)
        elif kind == wire.GUEST:
            self.host_of_guests().start_guest(msg.spec)
        elif kind == wire.STOP_GUEST:
            self.host_of_guests().stop_guest(msg.worker_index)

    def retire_from_awake_count(self):
        """(A guest whose thread ends, awake) off the session's awake count, with any count a ring made for
        it as it slept."""
        self._bell.retire_waiter()

    def as_task(self, fn):
        """A replayed task's function as this worker runs it: in a host, holding the baton as this worker (its
        own generators), beside the host's actors."""
        if self._hosting is not None:
            return self._hosting.baton.run(self, fn)
        return fn

    def load_code(self, code_id):
        obj = self._code.get(code_id)
        if isinstance(obj, (bytes, bytearray)):
            import cloudpickle  # noqa: F401  (pickles by value need it importable)
            import pickle
            obj = pickle.loads(obj)
            self._code[code_id] = obj
        return obj

    # ---------------------------------------------------------------- arguments and results
    def _descriptor_value(self, desc):
        kind, payload, contained, is_error = desc
        if kind == INLINE:
            value = serialization.loads_pack(payload)
        else:
            # Map, read, forget: the mapping lives exactly as long as the values that view it,
            # so a freed object's memory goes back to the OS once the user drops it.
            value = serialization.loads_pack(serialization.map_segment(payload))
        for oid in contained:
            self._received[oid] += 1
        return value, is_error

    def resolve(self, args_desc, arg_descs):
        """The executor's host hook: the call's arguments, direct refs replaced by their values."""
        args, kwargs = self._descriptor_value(args_desc)[0]
        if not arg_descs:
            return args, kwargs
        values = []
        for desc in arg_descs:
            value, is_error = self._descriptor_value(desc)
            if is_error:
                raise executor.DependencyFailed(value)
            values.append(value)
        args = tuple(values[a.index] if type(a) is _ArgRef else a for a in args)
        if kwargs:
            kwargs = {k: (values[v.index] if type(v) is _ArgRef else v) for k, v in kwargs.items()}
        return args, kwargs

    def store_value(self, object_id, value, is_error=False):
        """Serialize one result; large ones go to a segment this worker creates (the driver adopts it)."""
        ser = None if is_error else serialization.inline_plain(value)
        if ser is not None and type(ser) is not serialization.Serialized:
            return (INLINE, ser, [], False)
        if ser is None:
            ser = serialization.serialize(value, is_error=is_error)
        if ser.size <= serialization.INLINE_LIMIT:
            return (INLINE, ser.inline(), ser.contained, is_error)
        # Unique per write: a retried generator yields the same item ids again, and its first run's files stay.
        name = f"rr-{self.session}-{object_id.hex()}-{os.urandom(4).hex()}"
        directory = spilling.directory_for(ser.size)
        if directory == self.shm_dir:
            path = os.path.join(directory, name)
            if handoff.claim(ser, path):          # the file changes hands at handoff.commit(), before the report
                return (SEGMENT, path, ser.contained, is_error)
        path = spilling.write(ser, name, directory)
        return (SEGMENT, path, ser.contained, is_error)

    store = store_value                    # the executor's host hooks (see executor)
    run_async = staticmethod(asyncio.run)
    user_errors_only = False

    @property
    def interrupt_cancels(self):
        return not self.is_actor             # a task's SIGINT is ray.cancel; an actor's is the user's error

    def stream_item(self, stream_id, index, value, keep):
        """One yielded item goes to the driver as it comes (a generator's consumer may be waiting)."""
        oid = _item_id(stream_id, index)
        desc = self.store_value(oid, value)
        handoff.commit()
        self.send(wire.StreamItem(oid, desc, keep))
        return oid

    # ---------------------------------------------------------------- tasks
    def _on_sigint(self, signum, frame):
        # The driver cancels a running task with CANCEL, then SIGINT (again, until this count moves: a signal
        # that lands just before a blocking call is only seen once the call returns).  Between tasks the
        # signal is for one that has just finished; before a task starts, _cancelled_before_start sees it.
        # A dynamic task takes only a SIGINT tagged for it: one sent for the task before it may land after
        # that task ended and this one (sent behind it) started.
        if self._in_task and (self._bell.cancelled_task() == ids.tag64(self.current_task_id)
                              if self._replayed_invocation < 0
                              else self._replayed_invocation == self._bell.cancelled_invocation()):
            self._bell.note_interrupt()
            raise KeyboardInterrupt

    def _on_cancel(self, task_id):
        """ray.cancel of an actor call (a task's cancel is its SIGINT): remembered for is_canceled() and the
        call's end; an async actor's coroutine is cancelled, as in Ray."""
        if not self.is_actor:
            return
        self._cancelled_calls.add(task_id)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cancel_async_call, task_id)

    def _cancel_async_call(self, task_id):
        # On the actor's event loop.  A call that has not started finds its id in _cancelled_calls.
        task = self._async_calls.get(task_id)
        if task is not None:
            task.cancel()

    def current_call_cancelled(self):
        """runtime_context.is_canceled(): a sync actor's main thread reads ahead for a CANCEL of its call."""
        if self._loop is not None:
            raise RuntimeError("This method is not supported in an async actor.")
        task_id = self.current_task_id
        if task_id is None:
            return False
        if task_id in self._cancelled_calls:
            return True
        if threading.current_thread() is self._reader_thread:
            return self._cancelled_before_start(task_id)
        return False

    def _read_ahead(self):
        while True:
            raw = self._inbound.read()
            if raw is None:
                break
            self._deferred.append(wire.decode(raw))

    def _give_back(self, task_id):
        """DROP: the driver wants back a task it sent behind the one this worker runs (which blocked in get
        or wait).  Given back only if it has not started; else its DONE answers."""
        self._hand_back(wire.RUN_TASK, task_id)

    def _dropped_before_start(self, task_id):
        """Whether a DROP of this task waits in the inbox (read ahead): then it is given back unstarted."""
        self._read_ahead()
        return self._hand_back(wire.DROP, task_id)

    def _hand_back(self, kind, task_id):
        """Take the deferred ``kind`` message of ``task_id`` out and tell the driver the task is given back."""
        for msg in self._deferred:
            if msg.KIND == kind and msg.task_id == task_id:
                self._deferred.remove(msg)
                self.send(wire.Dropped(task_id))
                return True
        return False

    def _cancelled_before_start(self, task_id):
        """Whether a CANCEL of this call waits in the inbox (read ahead).  One found is taken out and noted
        here, so the call's end forgets it: left for the loop, it would be noted after the call had ended."""
        self._read_ahead()
        for msg in self._deferred:
            if msg.KIND == wire.CANCEL and msg.task_id == task_id:
                self._deferred.remove(msg)
                self._on_cancel(task_id)
                return True
        return False

    def _run_task(self, msg):
        task_id, code_id, name = msg.task_id, msg.code_id, msg.name
        args_desc, arg_descs, return_ids, num_returns = msg.args, msg.arg_values, msg.return_ids, msg.num_returns
        env, resources, pg_info = msg.env, msg.resources, msg.pg
        if self._dropped_before_start(task_id):
            return
        self.current_pg = pg_info
        self.current_task_id = task_id
        self.current_task_name = name
        self.display_name = name.rsplit(".", 1)[-1]
        set_title(_title(f"ray::{self.display_name}"))
        self.assigned_resources = resources
        saved_env = None
        if env:
            saved_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
        try:
            self._in_task = True            # before the look-ahead: a SIGINT after it interrupts what follows
            if self._cancelled_before_start(task_id):
                raise KeyboardInterrupt
            fn = self.load_code(code_id)
            if self._tracer is not None:
                fn = executor.traced(self._tracer, "task", fn, None, getattr(fn, "__module__", None))
            handoff.ready()
            results, status = executor.run(self, name, fn, args_desc, arg_descs, return_ids, num_returns)
        except BaseException as exc:  # noqa: BLE001 - a SIGINT (cancel) before or after the call itself
            results, status = executor.fail(self, name, exc, return_ids)
        finally:
            self._in_task = False
            if saved_env is not None:
                for k, v in saved_env.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            self.current_task_id = None
        nested = self._pin_nested(results)
        # Drop our views of the arguments before reporting, so their segments can be recycled at once.
        msg = args_desc = arg_descs = None
        handoff.commit()
        self.send(wire.Done(task_id, results, status <= executor.PARTIAL))
        self._unpin(nested)
        handoff.refill()
        set_title(_IDLE_TITLE)

    # ---------------------------------------------------------------- actors
    def _create_actor(self, msg):
        actor_id, code_id, class_name, args_desc, arg_descs = (msg.actor_id, msg.code_id, msg.class_name,
                                                               msg.args, msg.arg_values)
        max_concurrency, is_async, resources = msg.max_concurrency, msg.is_async, msg.resources
        handle_info, trace_key, pg_info = msg.handle_info, msg.trace_key, msg.pg
        self.current_pg = pg_info
        self.is_actor = True
        self.actor_id = actor_id
        self.actor_name = handle_info[2] if handle_info and len(handle_info) > 2 else None
        self.display_name = class_name
        self._actor_title = _title(f"ray::{class_name}")
        self._call_titles = {}
        set_title(self._call_title("__init__"))
        self.assigned_resources = resources
        self.actor_handle_info = handle_info
        self._max_concurrency = max_concurrency
        if is_async:
            # Ray runs an asyncio actor's constructor on its event loop (it may start asyncio tasks).
            self._loop = asyncio.new_event_loop()
            self._loop.set_exception_handler(_quiet_about_exit_actor)
            threading.Thread(target=self._loop.run_forever, name="rayreact-asyncio", daemon=True).start()
        try:
            cls = self.load_code(code_id)
            args, kwargs = self.resolve(args_desc, arg_descs)
            self.actor_instance = cls.__new__(cls)
            if self._tracer is None or trace_key is None:
                self._tracer = None
                self._construct(self.actor_instance.__init__, args, kwargs)
            else:
                self._tracer.actor_key = trace_key
                self._construct(lambda *a, **k: self._tracer.run(
                    "actor_create", self.actor_instance.__init__, "__init__", a, k, cls.__module__,
                    concurrent=bool(is_async or max_concurrency > 1)), args, kwargs)
            error = None
        except BaseException as exc:  # noqa: BLE001
            error = exc.error if isinstance(exc, executor.DependencyFailed) else \
                executor.task_error(self, f"{class_name}.__init__", exc, self.actor_instance)
        if self.exit_requested:
            error = exceptions.ActorDiedError(error_msg=f"The actor {class_name} exited in its constructor: "
                                                        "exit_actor() is called.")
        if error is None and is_async:
            self._async_sem = None
            if max_concurrency:
                async def make_sem():
                    return asyncio.Semaphore(max_concurrency)
                self._async_sem = asyncio.run_coroutine_threadsafe(make_sem(), self._loop).result()
        elif error is None and max_concurrency > 1:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_concurrency, thread_name_prefix="rayreact-actor")
        set_title(self._actor_title)
        if self.exit_requested:
            # exit_actor() in the constructor: clean up first, as the driver ends a failed actor's process.
            self._exit_lock.acquire()
            self._graceful_cleanup()
        if error is None:
            self.send(wire.Done(b"create:" + actor_id, [], True))
        else:
            self.send(wire.Done(b"create:" + actor_id, [(b"", self.store_value(b"", error, True))], False))
        if self.exit_requested:
            self._end(0)

    def _construct(self, init, args, kwargs):
        if self.host is not None:
            init = self.host.baton.run(self, init)
        if self._loop is None:
            init(*args, **kwargs)
            return

        async def on_the_loop():
            init(*args, **kwargs)
        asyncio.run_coroutine_threadsafe(on_the_loop(), self._loop).result()

    def _dispatch_call(self, msg):
        if self.stopping:
            return                      # killed: the driver has failed this call already
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._run_call_async(msg), self._loop)
        elif self._pool is not None:
            self._pool.submit(self._run_call, msg)
        else:
            self._run_call(msg)

    # ---------------------------------------------------------------- what the worker-side reactor uses
    # core.reactor.WorkerReactor runs this process' message loop while a replay runs.
    @property
    def bell(self):
        """This worker's doorbell: the driver, other workers and this worker's own threads ring it."""
        return self._bell

    @property
    def inbound(self):
        """The ring of messages from the driver."""
        return self._inbound

    @property
    def running(self):
        """False once the worker is ending (an actor exited, the driver said stop)."""
        return self._running

    @property
    def tracer(self):
        """rayreact compare's tracer of the calls run here, or None."""
        return self._tracer

    def has_messages(self):
        """A message is waiting: held back, or on the inbound ring."""
        return bool(self._deferred) or self._inbound.readable()

    def has_deferred(self):
        """A message is held back (a guest stepped by its host: its own thread pumped it off the ring)."""
        return bool(self._deferred)

    def next_deferred(self):
        """The next message held back, or None (the inbound ring is not read)."""
        return self._deferred.popleft() if self._deferred else None

    def pump_inbound(self):
        """(A guest's own thread, while its host steps its reactor) take what came on the inbound ring:
        replies go to the requests waiting for them, code is kept, the rest is held for the reactor.
        Whether anything came."""
        came = False
        while True:
            raw = self._inbound.read()
            if raw is None:
                break
            came = True
            msg = wire.decode(raw)
            if not self._took_at_once(msg):
                self._deferred.append(msg)
        return came

    def _took_at_once(self, msg):
        """Messages any reader of the inbound ring takes on the spot (a reply, code): whether ``msg`` was one."""
        if msg.KIND == wire.REPLY:
            self._deliver_reply(msg.req_id, msg.payload)
        elif msg.KIND == wire.DEFINE:
            self._code[msg.code_id] = msg.code
        else:
            return False
        return True

    def defer_first(self, msgs):
        """Handle ``msgs`` next, in their order, before any message still to come."""
        self._deferred.extendleft(reversed(msgs))

    def begin_replayed_task(self, index):
        """A replayed task call (invocation ``index``) runs now: a cancel names it, and SIGINT interrupts it."""
        self._replayed_invocation = index
        self._in_task = True

    def end_replayed_task(self):
        self._in_task = False
        self._replayed_invocation = -1

    @property
    def runs_calls_concurrently(self):
        """A threaded (``max_concurrency`` > 1) or async actor: its calls may overlap."""
        return self._loop is not None or self._pool is not None

    def start_concurrent_call(self, method_name, run, run_async):
        """Start one call of a threaded or async actor the way its dynamic calls start: ``run(fn)`` on its thread
        pool, or ``await run_async(fn)`` on its event loop within ``max_concurrency``; ``fn`` is the method,
        traced where the script is.  Returns the call's ``concurrent.futures.Future`` (of what ``run`` returns)."""
        try:
            fn = self.call_target(method_name)
        except Exception as exc:  # noqa: BLE001 - reported as the call's error, by the executor
            fn = _raiser(exc)
        traced = self._tracer is not None and not method_name.startswith("__ray")
        module = type(self.actor_instance).__module__
        if self._loop is None:
            if traced:
                fn = executor.traced(self._tracer, "actor_call", fn, method_name, module)
            return self._pool.submit(run, fn)
        if traced:
            fn = _traced_async(self._tracer, fn, method_name, module)
        sem = self._async_sem

        async def within_the_limit():
            if sem is None:
                return await run_async(fn)
            async with sem:
                return await run_async(fn)
        return asyncio.run_coroutine_threadsafe(within_the_limit(), self._loop)

    def call_target(self, method_name):
        fn = self._call_target(method_name)
        if self.host is not None:
            return self.host.baton.run(self, fn)
        return fn

    def _call_target(self, method_name):
        if method_name == "__ray_ready__":
            return lambda: True
        if method_name == "__ray_call__":          # handle.__ray_call__.remote(fn, *args): fn(the actor, *args)
            instance = self.actor_instance
            return lambda fn, *args, **kwargs: fn(instance, *args, **kwargs)
        if method_name == "__ray_terminate__":
            def terminate():
                self.exit_requested = True
                raise SystemExit(0)
            return terminate
        return getattr(self.actor_instance, method_name)

    def _call_title(self, method_name, task_name=None):
        key = (method_name, task_name)
        title = self._call_titles.get(key)
        if title is None:
            text = f"ray::{task_name}" if task_name else f"ray::{self.display_name}.{method_name}"
            title = self._call_titles[key] = _title(text)
        return title

    def _run_call(self, msg):
        task_id, method_name, task_name = msg.task_id, msg.method, msg.task_name
        args_desc, arg_descs, return_ids, num_returns = msg.args, msg.arg_values, msg.return_ids, msg.num_returns
        self.current_task_id = task_id
        set_title(self._call_title(method_name, task_name), comm=False)   # comm would cost a system call per call
        try:
            fn = self.call_target(method_name)
        except Exception as exc:  # noqa: BLE001 - reported as the call's error, by the executor
            fn = _raiser(exc)
        if self._tracer is not None and not method_name.startswith("__ray"):
            fn = executor.traced(self._tracer, "actor_call", fn, method_name, type(self.actor_instance).__module__)
        handoff.ready()
        results, status = executor.run(self, f"{self.display_name}.{method_name}", fn, args_desc, arg_descs,
                                       return_ids, num_returns, self.actor_instance)
        if status != executor.EXITED and _exit_called_here.get():
            results, status = executor.exited(self, return_ids)
        nested = self._pin_nested(results)
        # Drop our views of the arguments before reporting, so their segments can be recycled at once.
        msg = args_desc = arg_descs = None
        handoff.commit()
        self.send(wire.Done(task_id, results, status <= executor.PARTIAL))
        self._cancelled_calls.discard(task_id)
        self._unpin(nested)
        handoff.refill()
        set_title(self._actor_title, comm=False)
        if status == executor.EXITED:
            self.exit_now()

    async def _run_call_async(self, msg):
        task_id, method_name, task_name = msg.task_id, msg.method, msg.task_name
        args_desc, arg_descs, return_ids, num_returns = msg.args, msg.arg_values, msg.return_ids, msg.num_returns
        name = f"{self.display_name}.{method_name}"
        sem = self._async_sem
        self.current_task_id = task_id
        self._async_calls[task_id] = asyncio.current_task()
        acquired = False
        set_title(self._call_title(method_name, task_name), comm=False)
        try:
            if sem is not None:
                await sem.acquire()
                acquired = True
            if task_id in self._cancelled_calls:
                raise asyncio.CancelledError
            fn = self.call_target(method_name)
            if self._tracer is not None and not method_name.startswith("__ray"):
                fn = _traced_async(self._tracer, fn, method_name, type(self.actor_instance).__module__)
            results, status = await executor.run_async(self, name, fn, args_desc, arg_descs, return_ids,
                                                       num_returns, self.actor_instance)
        except BaseException as exc:  # noqa: BLE001 - cancelled while it waited for its turn
            results, status = executor.fail(self, name, exc, return_ids, self.actor_instance)
        finally:
            if acquired:
                sem.release()
            self._async_calls.pop(task_id, None)
            self._cancelled_calls.discard(task_id)
        if status != executor.EXITED and _exit_called_here.get():
            results, status = executor.exited(self, return_ids)
        self.send(wire.Done(task_id, results, status <= executor.PARTIAL))
        set_title(self._actor_title, comm=False)
        if status == executor.EXITED:
            self.exit_now()

    def end_process(self, code):
        """The executor's host hook for ``sys.exit(code)`` in a task: the process ends as Python's would."""
        if isinstance(code, str):
            print(code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))

    def request_exit(self):
        self.exit_requested = True
        _exit_called_here.set(True)

    @property
    def is_asyncio_actor(self):
        return self._loop is not None

    def exit_now(self):
        self._exit_lock.acquire()       # never released: a second caller waits for the process to end
        self.send(wire.Exiting("exit_actor"))
        self._graceful_cleanup()
        self._end(0)

    def _end(self, code):
        """The actor ends: its process, or, for a guest, its thread (the host goes on)."""
        if self.host is not None:
            raise hosting.GuestEnded(code)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def _graceful_cleanup(self):
        """A graceful end (exit_actor, __ray_terminate__, out of scope) runs the actor's ``__ray_shutdown__``
        and then its atexit handlers, as in Ray; ``ray.kill`` runs neither.  A guest runs only its
        ``__ray_shutdown__`` (the atexit handlers are the host process's)."""
        if self.host is None:
            cutoff = threading.Timer(GRACEFUL_SHUTDOWN_S, os._exit, (1,))
            cutoff.daemon = True
            cutoff.start()
        shutdown = getattr(self.actor_instance, "__ray_shutdown__", None)
        if shutdown is not None:
            if self.host is not None:
                shutdown = self.host.baton.run(self, shutdown)
            try:
                shutdown()
            except Exception:  # noqa: BLE001 - reported, and the actor still ends
                traceback.print_exc()
        if self.host is not None:
            self.host.baton.run(self, self.host.run_at_exit)(self)
            return
        try:
            import atexit
            atexit._run_exitfuncs()
        except Exception:
            pass

    def _shutdown_executors(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def _item_id(stream_id, index):
    from .submission import item_id
    return item_id(stream_id, index)


def _raiser(exc):
    def raise_it(*args, **kwargs):
        raise exc
    return raise_it


def _traced_async(tracer, fn, method, module):
    """An asyncio actor's call is recorded once its coroutine has finished on the actor's loop."""
    async def traced(*args, **kwargs):
        value = fn(*args, **kwargs)
        if asyncio.iscoroutine(value):
            value = await value
        elif hasattr(value, "__anext__"):
            value = [item async for item in value]
        tracer.record("actor_call", method, args, kwargs, value, module)
        return value
    return traced


def _quiet_about_exit_actor(loop, context):
    """exit_actor() in an asyncio task of the actor's own ends the actor; it is not an unretrieved error."""
    if not isinstance(context.get("exception"), exceptions.AsyncioActorExit):
        loop.default_exception_handler(context)


def _as_raisable(err):
    if isinstance(err, exceptions.RayTaskError) and not isinstance(err.cause, exceptions.RayError):
        return err.as_instanceof_cause()
    return err
