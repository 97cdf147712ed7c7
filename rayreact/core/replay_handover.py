"""Ending a replay run: the hand-over of its values to the dynamic runtime, and the clean-up after it.

::

    ReplayRun.stop ──▶ Handover.stop: STOP to every link (naming the values the driver lacks), every value
        │              the script can still name made a pending object of the dynamic table
        ▼
    the handover thread: drain the links until each has stopped, meanwhile rerunning dynamically the
        calls a dead lent worker or retried actor never finished (core.replay_rerun: their results go to the
        reactions that wait for them), fill the pending objects (or the error each deserves), ack the workers, give the
        lent workers back, then free the run's files and read its timeline
        └──▶ Reactor.handed_over(run)

``ReplayRun.abandon`` (shutdown) and a start that failed use ``cleanup`` and ``give_back_workers`` alone.
The handover reaches the run only through its public interface (listed in ReplayRun's docstring), the
runtime only through ``lock``, ``object_table``, ``send_to_worker``, ``bell``, ``unpin_task_worker`` and
``wait_until``.  It keeps one thing of its own: the workers' timelines once read (``timeline``).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time

from .. import exceptions
from . import channel, wire, refcount, serialization
from .replay_ops import Link
from .replay_rerun import Reruns

logger = logging.getLogger("rayreact")


class Handover:
    """How one run ends: ``stop`` (the hand-over, on a thread of its own), ``cleanup``, ``give_back_workers``."""

    def __init__(self, run):
        self.run = run
        self.timeline = None             # reactor name -> (pid, events), read once the run has ended
        self.reruns = Reruns(run)

    # ------------------------------------------------------------------ the hand-over
    def stop(self, reason, wait):
        """ReplayRun.stop's work: see there."""
        run = self.run
        run.end_reason = reason
        run.ended = time.monotonic()
        ext = run.ext
        if run.dead_pending:
            run.absorb_deaths()
        # Which values the script still names, and which the driver does not hold.
        alive = []
        wanted = collections.defaultdict(list)
        counts = refcount.counts
        table = run.rt.object_table
        for (index, ret), oid in run.given.items():
            if not counts.get(oid) or oid in table:
                continue
            conn = self._output_conn(index, ret)
            alive.append((oid, (conn, index)))
            if (conn, index) not in run.cache:
                writer = run.writer_of.get(conn)
                if writer in run.links:
                    wanted[writer].append((conn, index))
        for name, link in run.links.items():
            if not link.dead:
                run.write(link, ext.control_frame(ext.STOP, wanted.get(name, [])))
        table.reserve_all([oid for oid, _ in alive])
        # Values a callee was lent nested in an argument that the dynamic table still waits for (reserved
        # already; on their way to the driver, so a STOP need not name them).  Taken after the STOPs: a write
        # to a full ring drains, and what comes then is filled as it comes.
        alive.extend(run.nested.pending())
        run.handover = threading.Thread(target=self._hand_over, args=(alive,), name="rayreact-handover",
                                        daemon=True)
        run.handover.start()
        if wait:
            run.handover.join()

    def _hand_over(self, alive):
        """The handover thread: drain the links until every one has stopped, fill the pending objects."""
        run = self.run
        try:
            self._drain_links()
            if not run.abandoned:
                self._fill(alive)
        except Exception:  # noqa: BLE001 - a bug here must not lose the values silently
            logger.exception("rayreact: handing replayed values over to the dynamic runtime failed")
            self._fill_lost(alive)
        finally:
            try:
                self.give_back_workers()
                for desc in run.handed.values():
                    if desc[0] == serialization.SEGMENT:
                        try:
                            os.unlink(desc[1])
                        except OSError:
                            pass
                run.handed.clear()
                self.cleanup()
            except Exception:  # noqa: BLE001 - the next run must not wait for this one forever
                logger.exception("rayreact: cleaning up after a replay run failed")
            finally:
                run.reactor.handed_over(run)

    def _drain_links(self):
        run = self.run
        reruns = self.reruns
        while not run.abandoned:
            if run.dead_pending:
                run.absorb_deaths()
            seen = run.gather.count()
            progressed = run.drain()
            progressed = reruns.advance() or progressed
            if not reruns.busy and all(link.stopped or link.dead for link in run.links.values()):
                break
            if progressed:
                continue
            if reruns.forwarding:
                # A rerun's result comes through the dynamic runtime: pump it while we wait (the script may
                # be blocked on something that result feeds).
                run.rt.wait_until(lambda: reruns.any_ready() or run.gather.count() != seen, 0.2)
            else:
                run.gather.wait(seen + 1, 0.2, 0.0, False)     # (the main thread goes on meanwhile)
        run.drain()

    def _fill(self, alive):
        run = self.run
        self.reruns.advance()
        self.reruns.give_up()             # (a lent worker that died once every link had stopped)
        rerun_keys = self.reruns.keys
        pairs = []
        rt = run.rt
        for oid, key in alive:
            if key in rerun_keys or rt.object_table.is_ready(oid):
                continue                  # (a nested ref's value, filled as it came: replay_nested)
            if oid in run.fast.cancelled:
                err = serialization.serialize(exceptions.TaskCancelledError(), is_error=True).pack()
                pairs.append((oid, (serialization.INLINE, err, [], True)))
                continue                  # (its value is freed below with everything not handed over)
            tok = run.cache.get(key)
            if tok is not None:
                pairs.append((oid, tok.descriptor()))
                tok.path = None
                continue
            desc = run.handed.pop(key, None)
            if desc is None:
                writer = run.writer_at(key)
                payload = run.death_payloads.get(writer)
                if payload is None:
                    payload = serialization.serialize(exceptions.RaySystemError(
                        f"rayreact lost a replayed value ({key}) on deoptimization"), is_error=True).pack()
                desc = (serialization.INLINE, payload, [], True)
            pairs.append((oid, desc))
        with rt.lock:                     # the acks after the fills, in one critical section
            rt.object_table.fill_all(pairs)
            for link in run.links.values():
                if not link.dead:
                    rt.send_to_worker(link.w, wire.Reactor("ack", run.number))
        rt.bell.ring()                    # a get may be waiting for these
        self.give_back_workers()

    def _fill_lost(self, alive):
        rt = self.run.rt
        err = serialization.serialize(exceptions.RaySystemError(
            "rayreact lost a replayed value on deoptimization"), is_error=True).pack()
        desc = (serialization.INLINE, err, [], True)
        rt.object_table.fill_all([(oid, desc) for oid, _ in alive])
        rt.bell.ring()

    def _output_conn(self, index, ret):
        run = self.run
        reaction = run.plan.reactions[(index - run.start) % run.P]
        return reaction.outputs[ret]

    # ------------------------------------------------------------------ giving back and cleaning up
    def give_back_workers(self):
        run = self.run
        lent, run.lent = run.lent, []
        if lent:
            with run.rt.lock:
                for w in lent:
                    run.rt.unpin_task_worker(w)

    def cleanup(self):
        run = self.run
        if run.ended is None:
            run.ended = time.monotonic()
        if run.fast is None:                  # never started: only files to remove
            self._close_rings_and_remove_files()
            return
        run.reap_arg_files()
        self._collect_timeline()
        for link in run.links.values():
            while link.arg_files:            # a dead worker's never-run invocations
                run.ext.free_segment(link.arg_files.popleft()[1])
        for tok in run.cache.values():
            tok.free()
        run.cache.clear()
        run.seed_views = []
        self._unlink_unread_frames()
        self._close_rings_and_remove_files()

    def _close_rings_and_remove_files(self):
        run = self.run
        for link in run.links.values():
            if isinstance(link, Link):        # (a start that failed early may leave placeholders)
                for ring in (link.inbox, link.out):
                    if ring is not None:
                        ring.close()
        if run.gather is not None:
            run.gather.close()
        for path in run.paths:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _unlink_unread_frames(self):
        # Frames nobody read (tokens sent to a reader that had stopped) may name segment links.
        ext = self.run.ext
        for path in self.run.ring_paths:
            try:
                ring = channel.Ring(path)
            except OSError:
                continue
            for frame in ring.read_all():
                if frame[0] == ext.TOKEN:
                    flags = ext.TOKEN_HEADER.unpack_from(frame, 0)[3]
                    if flags & ext.F_SEGMENT and not flags & ext.F_REFS:
                        try:
                            os.unlink(bytes(frame[ext.TOKEN_HEADER.size:]).decode())
                        except OSError:
                            pass
                elif frame[0] == ext.INVOKE and ext.INVOKE_HEADER.unpack_from(frame, 0)[2] == 2:
                    try:
                        os.unlink(bytes(frame[ext.INVOKE_HEADER.size:]).decode())
                    except OSError:
                        pass
            ring.close()

    # ------------------------------------------------------------------ the workers' timelines
    def _collect_timeline(self):
        if self.timeline is not None:
            return
        self.timeline = self.read_timeline()
        for link in self.run.links.values():
            if link.timeline is not None:
                link.timeline.close()
                link.timeline = None

    def read_timeline(self):
        """What each worker's timeline log holds now (``summary(live=True)`` reads it while the run goes on)."""
        out = {}
        for name, link in self.run.links.items():
            if link.timeline is not None:
                try:
                    out[name] = (link.pid, link.timeline.read())
                except (ValueError, OSError):
                    out[name] = (link.pid, [])
        return out
