"""What a replay run is made of: the records the run, its parts and the DriverPath share.

``ReplayRun`` (core.replay) holds a ``Link`` per replaying worker and a reactor.Op per plan position;
``replay_wiring`` opens the links' rings and compiles the ops, ``replay_handover`` reads both when the
run ends, and reactor.DriverPath runs the ops.  ``DEOPT`` is the fast paths' answer for "run
this call dynamically", ``TASK_CALLER`` the actor id a replayed task call has in the guard, and
``Refused`` says why a plan cannot run.  Plain records only: this module imports nothing of the reactor
layer, so each of those modules may import it.
"""

from __future__ import annotations

import collections

from .. import exceptions

DEOPT = object()                       # a fast path's answer: "deoptimized, run this call dynamically"
TASK_CALLER = "task"                   # a replayed task call's "actor id" in the DriverPath's guard


class Refused(Exception):
    """A plan replay cannot run (the reason is kept for ``explain``)."""


class TaskSlot:
    """What a lent pool worker stands in for, where an actor reactor has its ActorState."""

    actor_id = None
    class_name = "task"

    def __init__(self):
        self.death_error = exceptions.WorkerCrashedError("The worker of a replayed task died.")


class Link:
    """The driver's view of one replaying worker."""

    __slots__ = ("name", "w", "actor", "inbox", "out", "pairs_out", "timeline", "stopped", "dead", "pid", "bell",
                 "arg_files", "inflight")

    def __init__(self, name, w, actor):
        self.name = name
        self.w = w
        self.actor = actor
        self.inbox = None
        self.out = None
        self.timeline = None
        self.stopped = False
        self.dead = False
        self.pid = w.pid
        self.arg_files = collections.deque()   # (index, path): argument segments of invocations not yet run
        # The calls not yet known to have run, (index, invocation frame, argument values), of a worker whose
        # calls are sent again should it die: a lent task worker's, an actor's with max_task_retries.
        self.inflight = collections.deque() if self.is_task or actor.max_task_retries else None

    @property
    def is_task(self):
        """A lent pool worker (else an actor's worker)."""
        return isinstance(self.actor, TaskSlot)
