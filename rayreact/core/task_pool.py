"""The task pool: pool workers, the queue of ready tasks, scheduling them onto workers, and their completion.

::

    submit() ──▶ (args ready: core.calls) ──▶ enqueue() ──▶ task_queue ──schedule()──▶ an idle pool worker
                                                              │  (resources: core.node_resources)
                                                              └─▶ pipeline(): behind a busy worker's short task
    DONE ──▶ on_done(): returns filled, the next pipelined task starts or the worker idles, schedule() again
    a task blocked in get/wait: block()/unblock() (its CPU lent, its pipelined tasks recalled, the pool grows)
    a replay borrows idle workers: lendable()/pin()/unpin() (Runtime.pin_task_workers & co.)

``rt`` is the runtime (core.runtime); at construction this binds what it uses of it: ``procs``
(core.processes), ``calls``, ``node``, ``streams`` and ``object_table``.  Everything runs under the
runtime's lock.  A pool worker runs one task at a time (``w.task``), plus at most ``PIPELINE_DEPTH``
sent behind it (``w.pipelined``).
"""

from __future__ import annotations

import collections
import time

from .. import exceptions
from . import ids, wire, refcount, serialization, submission
from .calls import TaskSpec
from .serialization import INLINE


class TaskPool:
    # A fan-out of short tasks would idle every worker for most of each task, waiting a round trip through
    # the driver for its next one.  So a task may be sent behind the one a busy pool worker runs; the worker
    # starts it the moment the first ends.  Only tasks known to be short (a long one would hold up what waits
    # behind it while another worker idles), of the running task's resource shape (the next takes over its
    # share when it starts: accounting stays per running task), and never behind a task blocked in get.
    PIPELINE_DEPTH = 1
    PIPELINE_BELOW_SECONDS = 0.002

    def __init__(self, rt, pool_target):
        procs = rt.procs
        self._procs = procs
        self._workers = procs.workers
        self._send = procs.send
        self._ensure_defined = procs.ensure_defined
        calls = rt.calls
        self._hold_args = calls.hold_args
        self._when_args_ready = calls.when_args_ready
        self._failed_dependency = calls.failed_dependency
        self._ship_args = calls.ship_args
        self._task_finished = calls.task_finished
        self._complete_with_desc = calls.complete_with_desc
        self._complete_with_error = calls.complete_with_error
        node = rt.node
        self._node = node
        self._fits = node.fits
        self._acquire = node.acquire
        self._take_gpus = node.take_gpus
        self._pg_info = node.pg_info
        self._streams = rt.streams
        self._table = rt.object_table
        self.pool_target = pool_target
        self.idle_task_workers = collections.deque()
        self.task_queue = collections.deque()   # ready-to-run TaskSpecs waiting for resources/worker
        self.task_workers = []           # every pool worker started (dead ones too: few, and skipped)
        self._starting_task_workers = 0
        self._task_seconds = {}          # code id -> recent run time of its tasks (whether they may pipeline)

    def spawn_worker(self):
        self._starting_task_workers += 1
        self.task_workers.append(self._procs.spawn("task"))

    def worker_ready(self, w):
        """READY from a pool worker that runs nothing yet."""
        self._starting_task_workers -= 1
        self.idle_task_workers.append(w)
        self.schedule()

    # ================================================================== submission
    def submit(self, caller, code_id, name, args_desc, direct, return_ids, num_returns, options, pg=None):
        if refcount.released:
            self._table.release_dropped()
        spec = TaskSpec()
        spec.task_id = ids.task_id()
        spec.code_id = code_id
        spec.name = name
        spec.args_desc = args_desc
        spec.direct = direct
        spec.return_ids = return_ids
        spec.num_returns = num_returns
        spec.resources = submission.task_resources(options, 1)
        max_retries = options.get("max_retries")
        spec.retries_left = 3 if max_retries is None else (10 ** 9 if max_retries == -1 else max_retries)
        spec.retry_exceptions = options.get("retry_exceptions", False)
        spec.caller = caller
        spec.actor_id = None
        spec.method = None
        spec.pg = pg if pg is not None or caller is None else self._node.pg_of(options)
        env = (options.get("runtime_env") or {}).get("env_vars")
        spec.env = dict(env) if env else None
        owner = caller.index if caller is not None else None
        for oid in return_ids:
            self._table.reserve(oid, owner)
        self._hold_args(spec)
        self._when_args_ready(spec, self.enqueue)

    def enqueue(self, spec):
        if spec.cancelled:
            return
        failed = self._failed_dependency(spec)
        if failed is not None:
            self._complete_with_desc(spec, failed.desc)
            return
        self.task_queue.append(spec)
        self.schedule()

    # ================================================================== scheduling
    def schedule(self):
        """Start queued tasks in order while a task worker is idle; keep the pool big enough for what waits.

        The scan stops at the first task that finds no idle worker: every task needs one, so what follows
        could not start either (scanning on would make a fan-out quadratic: each submission and each
        finished task rescanned the whole queue).  Tasks passed over for lack of resources keep their place.
        """
        queue = self.task_queue
        if not queue:
            return
        node = self._node
        passed_over = []
        while queue:
            w = self._idle_task_worker()
            if w is None:
                if queue[0].cancelled:
                    queue.popleft()
                    continue
                if self._pipeline(queue[0]):
                    queue.popleft()
                    continue
                waiting = len(passed_over) + len(queue)
                while self.grow(waiting):
                    pass
                break
            spec = queue.popleft()
            if spec.cancelled:
                self.idle_task_workers.append(w)
                continue
            res = spec.resources
            if not (node.pg_fits(spec, res) if spec.pg else self._fits(res)):
                self.idle_task_workers.append(w)
                if not spec.pg and not node.feasible(res):
                    node.warn_infeasible(res)
                passed_over.append(spec)
                continue
            if spec.pg:
                node.pg_acquire(spec, res)
            else:
                self._acquire(res)
            spec.gpu_ids = self._take_gpus(res.get("GPU", 0))
            self._dispatch(w, spec)
        queue.extendleft(reversed(passed_over))

    def _idle_task_worker(self):
        while self.idle_task_workers:
            w = self.idle_task_workers.pop()   # LIFO: the worker that just finished is still warm (spinning)
            if not w.dead and w.task is None and not w.pinned:
                return w
        return None

    def grow(self, waiting):
        """Start one more task worker if tasks wait and the pool is below its target: True if it did."""
        workers = self._workers
        live = sum(1 for w in workers.values() if w.kind == "task" and not w.dead and not w.pinned)
        blocked = sum(1 for w in workers.values() if w.kind == "task" and not w.dead and w.blocked)
        target = self.pool_target + blocked
        if waiting and live < target and self._starting_task_workers < waiting:
            self.spawn_worker()
            return True
        return False

    def _dispatch(self, w, spec):
        spec.worker = w
        w.task = spec
        spec.started = time.monotonic()
        self._send_task(w, spec)

    def _send_task(self, w, spec):
        self._ensure_defined(w, spec.code_id)
        arg_descs = self._ship_args(w, spec)
        env = spec.env
        if spec.gpu_ids or "GPU" in spec.resources:
            env = dict(env or {})
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpu_ids)
        elif self._node.num_gpus:
            env = dict(env or {})
            env["CUDA_VISIBLE_DEVICES"] = ""
        self._send(w, wire.RunTask(spec.task_id, spec.code_id, spec.name, spec.args_desc, arg_descs,
                       spec.return_ids, spec.num_returns, env, {k: v for k, v in spec.resources.items()},
                       self._pg_info(spec)))

    def release_task_resources(self, spec):
        """A task left its worker (done, crashed or cancelled): give back its CPU/GPU/custom share."""
        node = self._node
        if spec.pg:
            node.pg_release(spec, spec.resources)
        else:
            node.release(spec.resources)
        node.give_gpus(spec.gpu_ids, spec.resources.get("GPU", 0))

    # ================================================================== pipelining
    def _pipeline(self, spec):
        """Send ``spec`` behind a busy pool worker's task if that may pay: True if it was sent."""
        if spec.cancelled or not self._may_pipeline(spec):
            return False
        for w in self.task_workers:
            running = w.task
            if (running is not None and not w.dead and not w.pinned and not w.blocked
                    and not running.cancelled
                    and len(w.pipelined) < self.PIPELINE_DEPTH and running.resources == spec.resources
                    and self._may_pipeline(running)):
                spec.worker = w
                w.pipelined.append(spec)
                self._send_task(w, spec)
                return True
        return False

    def _may_pipeline(self, spec):
        if spec.pg or spec.env or spec.num_returns < 0 or "GPU" in spec.resources:
            return False
        seconds = self._task_seconds.get(spec.code_id)
        return seconds is not None and seconds < self.PIPELINE_BELOW_SECONDS

    def _note_task_time(self, spec):
        if spec.started is not None:
            took = time.monotonic() - spec.started
            before = self._task_seconds.get(spec.code_id)
            self._task_seconds[spec.code_id] = took if before is None else 0.75 * before + 0.25 * took

    def _start_pipelined(self, w, finished):
        """``finished`` ended on ``w``; the task sent behind it starts now, with the share it held."""
        spec = w.pipelined.popleft()
        spec.gpu_ids = ()
        spec.started = time.monotonic()
        w.task = spec

    def on_given_back(self, w, task_id):
        """DROPPED: ``w`` gave back a task sent behind another before starting it; it queues again first."""
        if w.task is not None and w.task.task_id == task_id:
            spec = w.task                  # it had taken over the task before it
            w.task = None
            if w.pipelined and not w.dead:
                self._start_pipelined(w, spec)
            else:
                self.release_task_resources(spec)
                if not w.dead:
                    self.idle_task_workers.append(w)
        else:
            spec = next((s for s in w.pipelined if s.task_id == task_id), None)
            if spec is None:
                return
            w.pipelined.remove(spec)
        spec.worker = None
        if spec.cancelled:
            self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
        else:
            self.task_queue.appendleft(spec)
        self.schedule()

    # ================================================================== a task blocked in get / wait
    def block(self, w):
        """A task blocked in get or wait gives its CPU back so nested work can run (as Ray does), and the
        tasks sent behind it back to the queue: True if ``w`` runs a task (then unblock when it resumes)."""
        if w.kind != "task" or w.task is None:
            return False
        w.blocked += 1
        if not w.task.pg:
            self._node.lend_cpu(w.task.resources.get("CPU", 0))
        for spec in w.pipelined:
            self._send(w, wire.Drop(spec.task_id))    # DROPPED comes back, or DONE if it started
        self.schedule()
        self.grow(len(self.task_queue))
        return True

    def unblock(self, w):
        w.blocked -= 1
        if w.task is not None and not w.task.pg:
            self._node.reclaim_cpu(w.task.resources.get("CPU", 0))

    # ================================================================== lending to a replay
    def lendable(self):
        """Started pool workers that run nothing and are lent to no replay, least recently used first."""
        return list(dict.fromkeys(w for w in self.idle_task_workers
                                  if w.ready and not w.dead and w.task is None and not w.pinned))

    def pin(self, count, code_ids):
        """Lend ``count`` idle, started task workers (with ``code_ids`` defined on each), or None."""
        idle = self.lendable()
        if len(idle) < count:
            return None
        lent = idle[-count:]                  # the most recently used: still warm
        for w in lent:
            w.pinned = True
            for code_id in code_ids:
                self._ensure_defined(w, code_id)
        self.idle_task_workers = collections.deque(w for w in self.idle_task_workers if not w.pinned)
        return lent

    def unpin(self, w):
        if not w.pinned:
            return
        w.pinned = False
        if w.kind != "task":
            return                              # a host lent to a replay's task calls: never a pool worker
        if not w.dead and w.task is None:
            self.idle_task_workers.append(w)
            self.schedule()

    # ================================================================== completion
    def on_done(self, w, task_id, results, ok):
        """DONE from a pool worker."""
        spec = w.task
        w.task = None
        if spec is not None:
            self._note_task_time(spec)
            if w.pipelined and not w.dead:
                self._start_pipelined(w, spec)
            else:
                self.release_task_resources(spec)
        if not w.dead and w.task is None:
            self.idle_task_workers.append(w)
        if spec is None:
            for _, desc in results:
                self._table.discard(desc)
            return
        if not ok and spec.retry_exceptions and spec.retries_left > 0:
            if self._should_retry_exception(spec, results):
                spec.retries_left -= 1
                for _, desc in results:
                    self._table.discard(desc)
                spec.worker = None
                self.task_queue.append(spec)
                self.schedule()
                return
        if not ok and spec.num_returns == submission.DYNAMIC and results and results[0][1][3]:
            results = self._streams.error_as_item(w, results[0][0], results[0][1])
        for oid, desc in results:
            self._table.fill(oid, desc)
        self._task_finished(spec)
        self.schedule()

    @staticmethod
    def _should_retry_exception(spec, results):
        if spec.retry_exceptions is True:
            return True
        if isinstance(spec.retry_exceptions, (list, tuple)) and results:
            err = serialization.loads_pack(results[0][1][1]) if results[0][1][0] == INLINE else None
            cause = getattr(err, "cause", None)
            return isinstance(cause, tuple(spec.retry_exceptions))
        return False

    def worker_died(self, w, reason):
        """A pool worker's process ended (``w`` is marked dead): its task retries, fails or is cancelled."""
        # Tasks sent behind the running one never started: they run elsewhere, no retry spent.
        while w.pipelined:
            queued = w.pipelined.pop()
            queued.worker = None
            self.task_queue.appendleft(queued)
        spec = w.task
        w.task = None
        if spec is not None:
            self.release_task_resources(spec)
            if spec.cancelled:
                self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
            elif spec.retries_left > 0:
                spec.retries_left -= 1
                spec.worker = None
                self.task_queue.append(spec)
            else:
                self._complete_with_error(spec, exceptions.WorkerCrashedError(
                    f"The worker died unexpectedly while executing this task ({spec.name}). {reason}"))
        self._table.owner_died(w.index)
        self.schedule()

    # ================================================================== cancel / placement group removed
    def cancel(self, object_id, force):
        """Cancel the queued or running task returning ``object_id``: True if one was found."""
        for spec in list(self.task_queue):
            if object_id in spec.return_ids:
                spec.cancelled = True
                self.task_queue.remove(spec)
                self._complete_with_error(spec, exceptions.TaskCancelledError(spec.task_id.hex()))
                return True
        procs = self._procs
        for w in self.task_workers:
            for spec in (w.task, *w.pipelined):
                if spec is None or object_id not in spec.return_ids or w.dead:
                    continue
                spec.cancelled = True
                if force and spec is w.task:
                    procs.command(("kill", w.pid))
                else:
                    # The message first: a worker that has not started the task yet finds it and skips it.
                    # The tag next: a SIGINT meant for this task must not stop the one it was sent behind.
                    self._send(w, wire.Cancel(spec.task_id))
                    procs.flush_outboxes()
                    w.bell.cancel_task(ids.tag64(spec.task_id))
                    procs.interrupt(w, lambda w=w, spec=spec: w.task is spec)
                return True
        return False

    def evict_group(self, pg_id):
        """A removed placement group takes its queued and running tasks with it, as in Ray."""
        for spec in list(self.task_queue):
            if spec.pg and spec.pg[0] == pg_id:
                self.task_queue.remove(spec)
                self._complete_with_error(spec, exceptions.TaskPlacementGroupRemoved())
        for w in self._workers.values():
            spec = w.task
            if spec is not None and spec.pg and spec.pg[0] == pg_id and not w.dead and w.pid:
                spec.retries_left = 0
                self._procs.kill_pid(w.pid)
