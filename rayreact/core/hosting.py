"""Several actors in one worker process (co-location, opt-in): a host process and its guest workers.

::

    driver ──ring D→H── Guest(spec) ──▶ host process: a Worker of kind "host" (its main thread)
                                           └─ a thread per guest: Worker(spec).serve(), with rings of its own
                                              to the driver, so the driver sees one worker per actor
    user code of a guest ──▶ context.current (GuestRouter) ──▶ the guest worker of the calling thread
    a guest's method runs holding the host's Baton; it lets go while it waits in ray.get / ray.wait /
        time.sleep, so a blocking get in one actor does not stall another
    random.* / np.random.* ──▶ Generators: the calling guest's own instances; taking the baton from another
        guest switches torch's default generator: each actor draws from its own streams, as in a process
        of its own
    refs dropped anywhere in the process ──▶ Host.flush_releases: each guest gives back what it was lent
    a guest ends (exit_actor, ray.kill, out of scope) ──▶ Ended ──▶ the driver: that worker ended, the
        host and its other guests live on
    the host process dies ──▶ the driver: every guest of it died (ActorDiedError for each actor's callers)
    a replayed loop ──▶ one stepping thread (core.reactor.HostReactor, started by ``stepper``) runs every
        guest's reactions, and the loop's task calls the driver lent this host, acting as each in turn; a
        guest's own thread meanwhile only pumps its inbound ring

What guests share: the pid, module globals (an actor class that writes them or its class attributes is
not co-located: core.colocation), the working directory, environment variables, the process title.
An actor's ``atexit`` handlers are its own: they run when it ends gracefully.
A method that blocks in anything but ray.get/wait and time.sleep (a lock, a socket) holds the baton
meanwhile, so the host's other actors wait for it.  ``ray.kill`` of a guest ends it once its running
call returns (its callers see it dead at once), and it runs none of the calls queued behind; a call still
running after a grace (a loop) is stopped by raising ``GuestEnded`` in the guest's thread at moments that
thread runs user code (``Host.stop_guest``).  Not stopped: a call blocked in C code, a replayed reaction
(the host's stepping thread runs it), and code that catches the exception until the watch gives up.  As it
is an exception, not the end of a process, the call's ``finally`` blocks run, and threads the actor started
live on.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import random
import sys
import threading
import time
import traceback

from . import channel, refcount, wire
from .runtime_api import RuntimeFront

_here = threading.local()          # .worker: the guest worker whose thread this is
_real_sleep = time.sleep
_real_at_exit = atexit.register


_real_thread_start = threading.Thread.start
# A killed guest's running call may end by itself within STOP_GRACE_S; past it, it is interrupted (again,
# every STOP_EVERY_S, should its code catch the exception) until STOP_PATIENCE_S (see Host.stop_guest).
STOP_GRACE_S = 0.5
STOP_EVERY_S = 0.05
STOP_PATIENCE_S = 10.0
# Code in these files is the runtime's (threading: its events and locks): a guest is never interrupted there.
_RUNTIME_DIRS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
                 os.path.dirname(threading.__file__) + os.sep + "threading.py")


def _start_as_guest(thread):
    """A thread an actor's code starts is that actor's: its API calls and draws are the actor's."""
    guest = getattr(_here, "worker", None)
    if guest is not None:
        run = thread.run

        def run_as_guest():
            _here.worker = guest
            run()
        thread.run = run_as_guest
    _real_thread_start(thread)


class GuestEnded(BaseException):
    """Ends a guest's thread (exit_actor, ring closed): the host process goes on."""

    def __init__(self, code=0):
        super().__init__(code)
        self.code = code


# ---------------------------------------------------------------------- the global generators
class Generators:
    """Each guest's own ``random`` and numpy global generators, and torch's default generator per guest.

    The module functions of ``random`` and ``numpy.random`` (``random.random``, ``np.random.seed``...) are
    bound methods of one hidden instance each; in a host they are replaced by functions that call the
    instance of the calling thread's guest, created as a new process would seed it (from the OS).  No
    state is copied: a draw costs one more function call.  torch's default generator is a C++ singleton,
    so its state is switched with the baton (a microsecond).
    """

    def __init__(self, host):
        self._host = host
        self._own = {}                   # guest -> (random.Random, numpy RandomState)
        import numpy as np               # (a dependency of rayreact: present, and usually imported already)
        self._np = np
        self._route(random, random._inst, 0)
        self._route(np.random, np.random.mtrand._rand, 1)
        self._route(np.random.mtrand, np.random.mtrand._rand, 1)

    # numpy's module functions that are not bound methods of the hidden instance, but act on it.
    _BY_NAME = {"seed": "seed", "sample": "random_sample", "ranf": "random_sample"}

    def _route(self, module, hidden, which):
        for name, value in list(vars(module).items()):
            if not callable(value) or isinstance(value, type):
                continue
            if getattr(value, "__self__", None) is hidden:
                setattr(module, name, self._routed(module, name, name, which, value))
            elif which == 1 and name in self._BY_NAME:
                setattr(module, name, self._routed(module, name, self._BY_NAME[name], which, value))
            elif which == 1 and name in ("get_bit_generator", "set_bit_generator"):
                setattr(module, name, self._bit_generator_routed(module, name, value))

    def _mine(self):
        """The calling guest's (random.Random, RandomState), or None outside guests."""
        guest = getattr(_here, "worker", None) or self._host.baton.holder
        if guest is None:
            return None
        mine = self._own.get(guest)
        if mine is None:
            mine = self._own[guest] = (random.Random(), self._np.random.RandomState())
        return mine

    def _routed(self, module, name, method, which, original):
        mine_now = self._mine

        def routed(*args, **kwargs):
            mine = mine_now()
            if mine is None:
                return original(*args, **kwargs)
            return getattr(mine[which], method)(*args, **kwargs)
        return _named_like(routed, module, name, original)

    def _bit_generator_routed(self, module, name, original):
        mine_now, own = self._mine, self._own

        def routed(*args):
            mine = mine_now()
            if mine is None:
                return original(*args)
            if name == "get_bit_generator":
                return mine[1]._bit_generator
            guest = getattr(_here, "worker", None) or self._host.baton.holder
            own[guest] = (mine[0], self._np.random.RandomState(*args))
        return _named_like(routed, module, name, original)

    def forget(self, guest):
        self._own.pop(guest, None)


def _named_like(fn, module, name, original):
    """``fn`` standing in for ``module.name``: pickled by reference to it, documented as it."""
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module.__name__
    fn.__doc__ = original.__doc__
    fn.__wrapped__ = original
    return fn



class Baton:
    """Held by the guest whose user code runs; torch's default generator is the holder's while it holds it."""

    def __init__(self):
        self._lock = threading.Lock()
        self.holder = None               # the guest running user code now
        self._owner = None               # the thread that took the baton for it
        self._torch_of = None            # the guest whose state torch's default generator has now
        self._saved = {}                 # guest -> its torch generator state
        self._torch = None               # (torch's default generator, a new process's state) once imported

    def take(self, guest):
        self._lock.acquire()
        try:
            if self._torch_of is not guest:
                torch = self._torch or self._find_torch()
                if torch is not None:
                    generator, fresh = torch
                    if self._torch_of is not None:
                        self._saved[self._torch_of] = generator.get_state()
                    self._torch_of = None
                    # (none saved: the guest has not drawn yet, or torch came since: a new process's state)
                    generator.set_state(self._saved.pop(guest, fresh))
                self._torch_of = guest
        except BaseException:
            self._lock.release()
            raise
        self.holder = guest
        self._owner = threading.get_ident()

    def give(self):
        self.holder = self._owner = None
        self._lock.release()

    def held_on(self, guest):
        """The thread that holds the baton for ``guest`` now, or None."""
        owner = self._owner
        return owner if owner is not None and self.holder is guest else None

    def _find_torch(self):
        torch = sys.modules.get("torch")
        generator = getattr(torch, "default_generator", None)
        if generator is None or not hasattr(generator, "set_state"):
            return None
        self._torch = (generator, torch.Generator().get_state())
        return self._torch

    def forget(self, guest):
        """``guest`` ended: its state is kept no more."""
        with self._lock:
            self._saved.pop(guest, None)
            if self._torch_of is guest:
                self._torch_of = None

    def run(self, guest, fn):
        """``fn``, to be called holding the baton as ``guest``."""
        def holding(*args, **kwargs):
            self.take(guest)
            try:
                return fn(*args, **kwargs)
            finally:
                self.give()
        return holding

    def let_go(self, guest):
        """Before ``guest`` blocks: True if this thread held the baton for it and gave it up (``take`` it
        back after).  A thread the actor started holds no baton: it gives up nothing."""
        if self.holder is guest and guest is not None and self._owner == threading.get_ident():
            self.give()
            return True
        return False


# ---------------------------------------------------------------------- the API as user code sees it
class GuestRouter(RuntimeFront):
    """``context.current`` in a host process: every API call goes to the calling thread's guest (a thread
    user code started falls to the guest running user code now, else to the host itself)."""

    is_driver = False
    local_mode = False
    survives_fork = False

    def __init__(self, host):
        self._host = host

    @property
    def behind(self):
        worker = getattr(_here, "worker", None)
        if worker is None:
            worker = self._host.baton.holder or self._host.worker
        return worker

    @property
    def display_name(self):
        """(The name output lines of this thread are prefixed with.)"""
        return self.behind.display_name


class Host:
    """The host process's own worker (``worker``), its guests, and what they share."""

    def __init__(self, worker):
        self.worker = worker
        self.guests = {}                 # worker index -> guest Worker
        self.baton = Baton()
        self.generators = Generators(self)
        self.router = GuestRouter(self)
        self._at_exit = {}               # guest -> [(fn, args, kwargs)] its code registered with atexit
        self._stepper = None             # the HostReactor stepping the guests' replayed reactions, once one replays
        self._threads = {}               # worker index -> the ident of the guest's own thread
        self._stepper_lock = threading.Lock()
        # (Module functions that user code looks up at call time, or imports after the host started.)
        time.sleep = self._sleep
        atexit.register = self._register_at_exit
        threading.Thread.start = _start_as_guest

    def stepper(self, make):
        """The reactor stepping this host's replayed reactions on one thread (core.reactor.HostReactor): made
        by ``make(host)``, and its thread started, on first use."""
        with self._stepper_lock:
            if self._stepper is None:
                stepper = make(self)
                _real_thread_start(threading.Thread(target=stepper.serve, name="rayreact-host-reactor",
                                                    daemon=True))
                self._stepper = stepper
        return self._stepper

    def stepper_here(self):
        """The HostReactor if the calling thread is its stepping thread, else None."""
        stepper = self._stepper
        if stepper is not None and stepper.thread_ident == threading.get_ident():
            return stepper
        return None

    @staticmethod
    def act_as(guest):
        """The calling thread acts as ``guest`` (None: as itself) from now on; returns whom it acted as."""
        acting = getattr(_here, "worker", None)
        _here.worker = guest
        return acting

    def _guest_here(self):
        return getattr(_here, "worker", None) or self.baton.holder

    def _register_at_exit(self, fn, *args, **kwargs):
        """atexit.register in a guest's code: run when that actor ends gracefully, as its own process would."""
        guest = self._guest_here()
        if guest is None:
            return _real_at_exit(fn, *args, **kwargs)
        self._at_exit.setdefault(guest, []).append((fn, args, kwargs))
        return fn

    def run_at_exit(self, guest):
        """The atexit handlers ``guest``'s code registered, last first (its graceful end)."""
        for fn, args, kwargs in reversed(self._at_exit.pop(guest, [])):
            try:
                fn(*args, **kwargs)
            except Exception:  # noqa: BLE001 - reported, as Python reports a failing atexit handler
                traceback.print_exc()

    def start_guest(self, spec):
        """A Guest message: run a worker of ``spec`` on a thread of its own."""
        threading.Thread(target=self._run_guest, args=(spec,), name=f"rayreact-guest-{spec['worker_index']}",
                         daemon=True).start()

    def _run_guest(self, spec):
        try:
            guest = type(self.worker)(spec, host=self)
        except FileNotFoundError:
            return                       # its rings are gone: the driver ended it before it started
        except BaseException:  # noqa: BLE001 - told to the driver, which fails the actor's creation
            traceback.print_exc()
            _report_ended(spec, 1)
            return
        _here.worker = guest
        self.guests[guest.index] = guest
        self._threads[guest.index] = threading.get_ident()
        code = 0
        try:
            guest.serve()
        except GuestEnded as end:
            code = end.code
        except BaseException:  # noqa: BLE001 - the guest ends; the host and its other guests go on
            traceback.print_exc()
            code = 1
        finally:
            self.guests.pop(guest.index, None)
            self._threads.pop(guest.index, None)
            self.baton.forget(guest)
            self.generators.forget(guest)
            self._at_exit.pop(guest, None)
            try:
                guest.send(wire.Ended(code))
            except BaseException:  # noqa: BLE001 - its ring is gone: the driver already counts it dead
                pass
            guest.retire_from_awake_count()     # (its thread was counted awake, and ends so)

    def stop_guest(self, index):
        """A StopGuest message: guest ``index`` was killed.  It runs none of the calls queued behind its
        running one, and reads its Exit once that returns.  So that a call that never returns does not hold
        the baton from the other guests for ever, a watcher raises ``GuestEnded`` in the guest's thread,
        after a grace, at moments that thread holds the baton and runs user code (the exception surfaces
        there, and the call ends as any call that raised), until the guest has ended."""
        guest = self.guests.get(index)
        if guest is None:
            return
        guest.stopping = True
        start = time.monotonic()

        def watch():
            _real_sleep(STOP_GRACE_S)
            while index in self.guests:
                if time.monotonic() - start > STOP_PATIENCE_S:
                    print(f"rayreact: a killed actor ({guest.display_name}) is still running a call after "
                          f"{STOP_PATIENCE_S:g} s; the actors beside it in its process wait for it",
                          file=sys.stderr)
                    return
                self._raise_in_user_code(index)
                _real_sleep(STOP_EVERY_S if self.baton.held_on(guest) is not None else 0.005)
        _real_thread_start(threading.Thread(target=watch, name=f"rayreact-stop-guest-{index}", daemon=True))

    def _raise_in_user_code(self, index):
        ident = self._threads.get(index)
        guest = self.guests.get(index)
        if ident is None or guest is None or self.baton.held_on(guest) != ident:
            return                    # not in a call of its own (or in the runtime: a get, a sleep)
        frame = sys._current_frames().get(ident)
        if frame is None or frame.f_code.co_filename.startswith(_RUNTIME_DIRS):
            return
        # (sys._current_frames: CPython's, as the async raise is.)  Between the look and the raise, only a
        # GIL switch could let the guest's thread leave that frame; the exception is raised when the thread
        # next checks for one: mostly in the frame it ran, else in what that frame calls next.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(GuestEnded))

    def flush_releases(self):
        """Refs dropped in this process: each worker here gives back what the driver lent it."""
        released = refcount.drain_released()
        if not released:
            return
        workers = [self.worker, *list(self.guests.values())]
        batches = {}
        for oid in released:
            for worker in workers:
                # (a dict lookup per worker; the locked check only for the worker the driver lent it to)
                if not worker.has_received(oid):
                    continue
                n = refcount.unless_live(oid, lambda: worker.take_received(oid))
                if n:
                    batches.setdefault(worker, []).append((oid, n))
        for worker, batch in batches.items():
            try:
                worker.send(wire.Release(batch))
            except GuestEnded:
                pass                     # (that guest is gone: the driver forgot what it had lent it)

    def _sleep(self, seconds):
        guest = getattr(_here, "worker", None)
        stepper = self.stepper_here()
        let_go = self.baton.let_go(guest)
        try:
            if stepper is None:
                _real_sleep(seconds)
                return
            # A replayed reaction on the stepping thread: the host's other guests go on meanwhile.
            deadline = time.monotonic() + seconds
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                stepper.step_while_waiting(left)
        finally:
            if let_go:
                self.baton.take(guest)


def _report_ended(spec, code):
    """A guest that could not even start: its Ended, written on its ring to the driver directly."""
    try:
        ring = channel.Ring(spec["from_worker"])
        ring.reader_bell = channel.Doorbell(spec["driver_bell"])
        ring.write(wire.encode(wire.Ended(code)), 1.0)
    except BaseException:  # noqa: BLE001 - nothing more to do: its creation will not be answered
        traceback.print_exc()
