"""Replayed calls of a threaded or async actor run concurrently, as its dynamic calls do.

::

    reactor thread (WorkerReactor)                  the actor's thread pool, or its event loop
    ──────────────────────────────                  ──────────────────────────────────────────
    INVOKE: gather the inputs ──start(index, ...)──▶ the call runs (max_concurrency at a time)
    next INVOKE at once                                       │ ended
    ... ◀── wake (the worker's doorbell) ◀──── finished deque ┘ (index, results, status, t0, t1)
    take(): emit each call's tokens as it ends; log the calls in invocation order

A call of such an actor may wait for a later one (an ``asyncio.Event`` the next call sets, a
``threading.Barrier``), so the reactor thread must not run them one after another as it runs a plain
actor's reactions.  It starts each on the actor's own executor (``Worker.start_concurrent_call``: the
thread pool of ``max_concurrency`` threads, or the event loop within the actor's semaphore) in
invocation order, as Ray starts them, and goes on reading.  Results come back through ``finished``, a
deque the executor's threads append to, and the reactor thread writes every token (the rings have one
writer).  Tokens may leave out of order (readers key them by index); the timeline logs a call only once
every earlier one has ended, so ``last_index`` keeps meaning "every call up to here has run" (the driver
frees argument files by it).
"""

from __future__ import annotations

import collections

from . import executor


class ConcurrentCalls:
    """The calls of one replay run that a threaded or async actor is running."""

    def __init__(self, worker, host, wake):
        self.worker = worker
        self.host = host
        self.wake = wake                              # rings the reactor thread's doorbell
        self.finished = collections.deque()           # appended by the executor's threads
        self.started = collections.deque()            # indices in invocation order, not yet logged
        self.ended = {}                               # index -> (t0, t1, exiting) ended, not yet logged

    @property
    def running(self) -> int:
        """Calls started and not yet taken back by the reactor thread."""
        return len(self.started) - len(self.ended)

    def start(self, index, method, name, args, kwargs, outputs, t0):
        """Start one call; ``take`` gives its results back once it has ended."""
        self.started.append(index)
        host, nret, instance = self.host, len(outputs), self.worker.actor_instance

        def run(fn):
            return executor.run(host, name, fn, args, kwargs, outputs, nret, instance)

        async def run_async(fn):
            return await executor.run_async(host, name, fn, args, kwargs, outputs, nret, instance)

        def ended(future):
            try:
                results, status = future.result()
            except BaseException as exc:  # noqa: BLE001 - what the executor would not report: the call's error
                results = executor.everywhere(host, outputs, executor.task_error(host, name, exc, instance))
                status = executor.RAISED
            self.finished.append((index, results, status, t0))
            self.wake()

        self.worker.start_concurrent_call(method, run, run_async).add_done_callback(ended)

    def take(self):
        """The calls that have ended since the last look: ``(index, results, status, t0)`` each."""
        out = []
        finished = self.finished
        while finished:
            out.append(finished.popleft())
        return out

    def loggable(self, index, t0, t1, exiting):
        """Note that call ``index`` ended; return the calls that may now be logged, in invocation order."""
        self.ended[index] = (t0, t1, exiting)
        out = []
        started, ended = self.started, self.ended
        while started and started[0] in ended:
            first = started.popleft()
            out.append((first,) + ended.pop(first))
        return out
