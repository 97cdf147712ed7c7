"""Reads off the plan: a ``get`` or ``wait`` the plan has not at this position, served without leaving replay.

::

    DriverPath.get / .wait: the position expects something else ──▶ OffPlanReads.get / .wait
        each ref is one the run made ──▶ its token: in the driver's cache (or on its way there), or
        │                                 asked of the worker that made it (FETCH: it hands a copy over
        │                                 as soon as it has it)
        all of the dynamic table ───────▶ DEOPT without deoptimizing: the Reactor reads them through the
        │                                 runtime, outside its lock (a read may wait on another thread)
        some of each ───────────────────▶ served here if the dynamic ones are ready, else ``deviate``
        anything else (a ref of a run that ended...) ──▶ ``deviate``: the script goes on dynamically

A read changes nothing the workers compute, so the plan's position does not move: a loop that looks at a
result now and then (an evaluation every 50 iterations, a log line every 100 steps, a wait for whichever
result is ready first) keeps replaying between and across those looks.  Reaches the run only through its
public interface (``given``, ``cache``, ``handed``, ``links``, ``writer_at``, ``driver_reads``,
``death_payloads``, ``dead_pending``, ``reruns_due``, ``plan``, ``start``, ``P``, ``fast.cancelled``, ``ext``,
``rt``, ``fetch``, ``drain``, ``gather``, ``absorb_deaths``, ``deviate``, ``deopt_at_next_call``) and the
runtime through ``object_table``.
"""

from __future__ import annotations

import time

from .. import exceptions
from . import serialization
from .replay_ops import DEOPT


class OffPlanReads:
    """The run's reads off the plan, and how many it served (``count``, for explain())."""

    def __init__(self, run):
        self.run = run
        self.count = 0
        self.asked = set()          # keys asked of a worker (FETCH) and not yet here: asked once per run

    def get(self, object_ids, timeout, reason):
        keys = self._keys(object_ids)
        if keys is None:
            return self.run.deviate(reason)
        if not any(keys):
            return self._dynamic()
        dynamic = [oid for oid, key in zip(object_ids, keys) if key is None]
        table = self.run.rt.object_table
        if not all(table.is_ready(oid) for oid in dynamic):
            return self.run.deviate(reason)       # waiting on both planes at once: the dynamic runtime's
        tokens = self._collect(keys, len(keys), timeout)
        if tokens is DEOPT:
            return self.run.deviate(reason)
        values = dict(zip(dynamic, self.run.rt.get_values(dynamic, None))) if dynamic else {}
        self.count += 1
        out = []
        cancelled = self.run.fast.cancelled
        for oid, key, tok in zip(object_ids, keys, tokens):
            if key is None:
                out.append(values[oid])
                continue
            if tok is None:
                raise exceptions.GetTimeoutError(f"Get timed out: some object(s) not ready after {timeout} s.")
            if cancelled and oid in cancelled:
                raise exceptions.TaskCancelledError()
            value = tok.value()
            if tok.flags & self.run.ext.F_ERROR:
                from .submission import raisable
                raise raisable(value)
            out.append(value)
        return out

    def wait(self, object_ids, num_returns, timeout, reason):
        keys = self._keys(object_ids)
        if keys is None:
            return self.run.deviate(reason)
        if not any(keys):
            return self._dynamic()
        table = self.run.rt.object_table
        if not all(key is not None or table.is_ready(oid) for oid, key in zip(object_ids, keys)):
            return self.run.deviate(reason)       # a wait across both planes: the dynamic runtime's
        # (the dynamic refs are all ready: the results a loop in completion order started from, say)
        tokens = self._collect(keys, num_returns, timeout)
        if tokens is DEOPT:
            return self.run.deviate(reason)
        self.count += 1
        return [key is None or tok is not None for key, tok in zip(keys, tokens)]

    def bring(self, keys):
        """Into the driver's cache, what has come of the values of ``keys`` (each made by this run); a
        worker is asked once for each of the others (FETCH), which come later.  Never waits: the worker
        may be busy with a call that waits for what the script does next."""
        for key in keys:
            self._token(key)

    # ------------------------------------------------------------------ helpers
    def _dynamic(self):
        # Every ref is the dynamic table's: the Reactor reads them through the runtime (DEOPT asks for the
        # dynamic path; the run stays live, and its position does not move).
        self.count += 1
        return DEOPT

    def _keys(self, object_ids):
        """Per ref, (connection, producer index) if the run made it, None if the dynamic table has it;
        None for all if some ref is neither."""
        run = self.run
        made = {oid: index_ret for index_ret, oid in run.given.items()}
        table = run.rt.object_table
        reactions, start, period = run.plan.reactions, run.start, run.P
        keys = []
        for oid in object_ids:
            index_ret = made.get(oid)
            if index_ret is not None and index_ret[0] < run.first and oid in table:
                keys.append(None)           # a value the run started from: the dynamic table holds it, ready
            elif index_ret is not None:
                index, ret = index_ret
                keys.append((reactions[(index - start) % period].outputs[ret], index))
            elif oid in table:
                keys.append(None)
            else:
                return None
        return keys

    def _collect(self, keys, need, timeout):
        """Tokens for ``keys`` (None for the dynamic ones and those not ready) once ``need`` of them are
        there, or at ``timeout``; DEOPT if a lent task worker died (its results come from reruns)."""
        run = self.run
        deadline = None if timeout is None else time.monotonic() + timeout
        tokens = [None] * len(keys)
        missing = [i for i, key in enumerate(keys) if key is not None]
        have = len(keys) - len(missing)
        try:
            while True:
                if run.dead_pending:
                    run.absorb_deaths()
                    if run.reruns_due:
                        return DEOPT
                left = []
                for i in missing:                  # (only those still missing)
                    tok = self._token(keys[i])
                    if tok is None:
                        left.append(i)
                    else:
                        tokens[i] = tok
                have += len(missing) - len(left)
                missing = left
                if have >= need:
                    return tokens
                seen = run.gather.count()
                if run.drain():
                    continue
                remaining = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if remaining <= 0:
                    return tokens
                run.gather.wait(seen + 1, remaining)
        except BaseException:
            # Ctrl-C while waiting: the run ends at the script's next call, as on the fast path.
            run.deopt_at_next_call("the script was interrupted (a signal) during a replayed read")
            raise

    def _token(self, key):
        run = self.run
        tok = run.cache.get(key)
        if tok is not None:
            self.asked.discard(key)
            return tok
        desc = run.handed.pop(key, None)
        if desc is not None:
            self.asked.discard(key)
            tok = self._token_of(desc)
            run.cache[key] = tok            # aged with the run's other values (begin_period)
            return tok
        writer = run.writer_at(key)
        payload = run.death_payloads.get(writer)
        if payload is not None:
            tok = run.cache[key] = run.ext.Token(run.ext.F_ERROR, payload)
            return tok
        if key[0] in run.driver_reads:
            return None                     # on its way here anyway
        link = run.links.get(writer)
        if link is not None and not link.dead and key not in self.asked:
            self.asked.add(key)
            run.fetch(link, key)
        return None

    def _token_of(self, desc):
        ext = self.run.ext
        flags = ext.F_ERROR if desc[3] else 0
        if desc[0] == serialization.SEGMENT:
            return ext.Token(flags, serialization.map_segment(desc[1]), desc[1])
        return ext.Token(flags, desc[1])
