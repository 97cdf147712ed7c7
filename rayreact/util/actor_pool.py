"""``ActorPool``: spread calls over a fixed set of actors, one call per actor at a time.

Behaves like ``ray.util.ActorPool`` of Ray 2.60, including its less obvious rules,
because scripts depend on them:

* ``submit`` hands the value to the most recently freed actor (a stack of idle
  actors); when none is idle the call waits in a FIFO and is started by the
  next result that frees an actor.
* An actor is busy from ``submit`` until its result is *taken* with
  ``get_next``/``get_next_unordered`` (not merely until it is ready).
* ``get_next`` returns results in submission order; mixing it after
  ``get_next_unordered`` is refused with ``ValueError``.
* ``map``/``map_unordered`` first throw away every result still pending in the
  pool, then submit all values, and return a generator.
* An actor whose call raised ``ActorDiedError`` is dropped from the pool.

``fn(actor, value)`` may return one ObjectRef or a list of them; a list is
waited for as a whole.
"""

from __future__ import annotations

import time
from typing import Any, Callable, List, Optional

_TIMEOUT_MSG = "Timed out waiting for result"


def _refs_of(future) -> list:
    return list(future) if isinstance(future, (list, tuple)) else [future]


def _key_of(future):
    """Lists are unhashable; the pool files them under the tuple of their refs."""
    return tuple(future) if isinstance(future, list) else future


class ActorPool:
    """A fixed pool of actors that the pool keeps busy with one call each.

    Arguments:
        actors: the actor handles to use.
    """

    def __init__(self, actors: list):
        # Attribute names follow Ray's: some libraries inspect them.
        self._idle_actors = list(actors)
        self._future_to_actor = {}  # key of the pending future -> (task index, actor)
        self._index_to_future = {}  # task index -> future, for in-order retrieval
        self._next_task_index = 0
        self._next_return_index = 0
        self._pending_submits = []  # (fn, value) waiting for an idle actor

    # -- submitting -----------------------------------------------------------------------

    def submit(self, fn: Callable[[Any, Any], Any], value: Any) -> None:
        """Run ``fn(actor, value)`` on an idle actor, or queue it until one is free."""
        if not self._idle_actors:
            self._pending_submits.append((fn, value))
            return
        actor = self._idle_actors.pop()
        future = fn(actor, value)
        index = self._next_task_index
        self._next_task_index += 1
        self._future_to_actor[_key_of(future)] = (index, actor)
        self._index_to_future[index] = future

    def map(self, fn: Callable[[Any, Any], Any], values: List[Any]):
        """Submit ``fn(actor, v)`` for every value; return a generator of results in order."""
        self._discard_pending(ordered=True)
        for value in values:
            self.submit(fn, value)

        def results():
            while self.has_next():
                yield self.get_next()

        return results()

    def map_unordered(self, fn: Callable[[Any, Any], Any], values: List[Any]):
        """Like :meth:`map`, but yield each result as soon as it is ready."""
        self._discard_pending(ordered=False)
        for value in values:
            self.submit(fn, value)

        def results():
            while self.has_next():
                yield self.get_next_unordered()

        return results()

    def _discard_pending(self, ordered: bool) -> None:
        """Drop every outstanding result so a new map starts from an empty pool."""
        while self.has_next():
            try:
                if ordered:
                    self.get_next(timeout=0, ignore_if_timedout=True)
                else:
                    self.get_next_unordered(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass

    # -- retrieving -----------------------------------------------------------------------

    def has_next(self) -> bool:
        """Whether some submitted call has a result not yet returned."""
        return bool(self._future_to_actor)

    def get_next(self, timeout: Optional[float] = None, ignore_if_timedout: bool = False):
        """Return the result of the oldest call not yet returned.

        Raises ``TimeoutError`` when it is not ready within ``timeout`` seconds;
        with ``ignore_if_timedout`` the call is dropped (its actor freed) first.
        """
        import rayreact as ray

        if not self.has_next():
            raise StopIteration("No more results to get")
        if self._next_return_index >= self._next_task_index:
            raise ValueError("It is not allowed to call get_next() after get_next_unordered().")
        index = self._next_return_index
        future = self._index_to_future[index]
        timed_out = False
        if timeout is not None:
            refs = _refs_of(future)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
            if len(ready) < len(refs):
                if not ignore_if_timedout:
                    raise TimeoutError(_TIMEOUT_MSG)
                timed_out = True
        del self._index_to_future[index]
        self._next_return_index += 1
        _, actor = self._future_to_actor.pop(_key_of(future))
        if timed_out:
            self._return_actor(actor)
            raise TimeoutError(f"{_TIMEOUT_MSG}. The task {future} has been ignored.")
        return self._take_result(future, actor)

    def get_next_unordered(self, timeout: Optional[float] = None, ignore_if_timedout: bool = False):
        """Return the result of any finished call, waiting up to ``timeout`` seconds.

        With ``ignore_if_timedout``, a timeout drops the oldest outstanding call.
        """
        import rayreact as ray

        if not self.has_next():
            raise StopIteration("No more results to get")
        future = self._first_ready_future(ray, timeout)
        timed_out = future is None
        if timed_out:
            if not ignore_if_timedout:
                raise TimeoutError(_TIMEOUT_MSG)
            future = self._index_to_future[min(self._index_to_future)]
        index, actor = self._future_to_actor.pop(_key_of(future))
        del self._index_to_future[index]
        self._next_return_index = max(self._next_return_index, index + 1)
        if timed_out:
            self._return_actor(actor)
            raise TimeoutError(f"{_TIMEOUT_MSG}. The task {future} has been ignored.")
        return self._take_result(future, actor)

    def _first_ready_future(self, ray, timeout):
        """The pending future that becomes ready first (all refs of a list), or None on timeout."""
        futures = list(self._index_to_future.values())
        if all(not isinstance(f, (list, tuple)) for f in futures):
            ready, _ = ray.wait(futures, num_returns=1, timeout=timeout)
            return ready[0] if ready else None
        # Some calls returned several refs: wait until one group is complete.
        deadline = None if timeout is None else time.monotonic() + timeout
        all_refs = list(dict.fromkeys(r for f in futures for r in _refs_of(f)))
        while True:
            ready, not_ready = ray.wait(all_refs, num_returns=len(all_refs), timeout=0)
            ready = set(ready)
            for future in futures:
                if all(r in ready for r in _refs_of(future)):
                    return future
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            ray.wait(not_ready, num_returns=1, timeout=remaining)

    def _take_result(self, future, actor):
        import rayreact as ray

        alive = True
        try:
            return ray.get(future)
        except ray.exceptions.ActorDiedError:
            alive = False
            raise
        finally:
            self._return_actor(actor, alive)

    def _return_actor(self, actor, alive: bool = True) -> None:
        if alive:
            self._idle_actors.append(actor)
        if self._pending_submits and self._idle_actors:
            self.submit(*self._pending_submits.pop(0))

    # -- managing actors ------------------------------------------------------------------

    def has_free(self) -> bool:
        """Whether an actor is idle and no submitted call is waiting for one."""
        return bool(self._idle_actors) and not self._pending_submits

    def pop_idle(self):
        """Remove and return an idle actor, or None if none is free."""
        return self._idle_actors.pop() if self.has_free() else None

    def push(self, actor) -> None:
        """Add an actor to the pool (it immediately takes a waiting call, if any)."""
        busy = [a for _, a in self._future_to_actor.values()]
        if actor in self._idle_actors or actor in busy:
            raise ValueError("Actor already belongs to current ActorPool")
        self._return_actor(actor)
