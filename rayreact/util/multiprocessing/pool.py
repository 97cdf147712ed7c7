"""``Pool``: Python's ``multiprocessing.Pool`` interface run on a set of actors.

Matches ``ray.util.multiprocessing.Pool`` of Ray 2.60:

* the pool is ``processes`` actors (``num_cpus=0``; default: the session's CPU
  count, starting a session with that many CPUs if none runs); work is cut into
  chunks handed round-robin to the actors, each chunk one actor call;
* a function's exception is caught in the actor and re-raised by ``get`` as the
  original exception (not a ``RayTaskError``), as ``multiprocessing`` does;
  as in Ray, ``imap``/``imap_unordered`` yield it wrapped in a ``PoolTaskError``
  and ``error_callback`` receives that ``PoolTaskError``;
* timeouts raise ``multiprocessing.TimeoutError``;
* ``maxtasksperchild`` counts chunks: an actor that has run that many retires
  (after finishing its queued work) and a fresh one takes its place.

Unlike Ray, no thread per ``AsyncResult`` polls for results: results are
fetched when asked for, and a thread is started only to run callbacks.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from multiprocessing import TimeoutError
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

RAY_ADDRESS_ENV = "RAY_ADDRESS"


class PoolTaskError(Exception):
    """A function's exception, carried back from the pool actor as a value."""

    def __init__(self, underlying):
        self.underlying = underlying


class _PoolActor:
    """One worker process of the pool."""

    def __init__(self, initializer=None, initargs=None):
        if initializer:
            initializer(*(initargs or ()))

    def ping(self):
        pass

    def run_batch(self, func, batch):
        results = []
        for args, kwargs in batch:
            try:
                results.append(func(*(args or ()), **(kwargs or {})))
            except Exception as e:
                results.append(PoolTaskError(e))
        return results


_actor_class = None


def _pool_actor_class():
    """The remote class of the pool's actors, built once (``remote`` must not run at import)."""
    global _actor_class
    if _actor_class is None:
        import rayreact as ray

        _actor_class = ray.remote(num_cpus=0)(_PoolActor)
    return _actor_class


def _fetch_batch(ray, ref) -> list:
    """The results of one chunk; an error of the call itself (e.g. the actor died) stands for the chunk."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as e:
        return [e]


def _first_error(batch):
    return next((r for r in batch if isinstance(r, Exception)), None)


class AsyncResult:
    """The pending result of ``apply_async``/``map_async``/``starmap_async``. Not built directly."""

    def __init__(self, chunk_refs, callback=None, error_callback=None, single_result=False):
        self._chunk_refs = list(chunk_refs)
        self._single_result = single_result
        self._batches: Optional[List[list]] = None
        self._lock = threading.Lock()
        self._notifier = None
        if callback is not None or error_callback is not None:
            self._notifier = threading.Thread(target=self._notify, args=(callback, error_callback), daemon=True)
            self._notifier.start()

    def _collect(self, timeout: Optional[float]) -> bool:
        """Fetch every chunk if all are ready within ``timeout``; True once fetched."""
        import rayreact as ray

        with self._lock:
            if self._batches is not None:
                return True
            if timeout is not None:
                _, not_ready = ray.wait(self._chunk_refs, num_returns=len(self._chunk_refs), timeout=timeout)
                if not_ready:
                    return False
            self._batches = [_fetch_batch(ray, ref) for ref in self._chunk_refs]
            return True

    def _notify(self, callback, error_callback):
        self._collect(None)
        errors = (_first_error(b) for b in self._batches)
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            if error_callback is not None:
                error_callback(error)
        elif callback is not None:
            values = [r for batch in self._batches for r in batch]
            callback(values[0] if self._single_result else values)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Return when the result is ready or ``timeout`` seconds passed (never raises)."""
        if self._notifier is not None:
            self._notifier.join(timeout)
        else:
            self._collect(timeout)

    def ready(self) -> bool:
        """Whether the result is ready (and its callback, if any, has run)."""
        if self._notifier is not None:
            return not self._notifier.is_alive()
        return self._collect(0)

    def successful(self) -> bool:
        """Whether no call raised; ``ValueError`` if the result is not ready yet."""
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return all(_first_error(b) is None for b in self._batches)

    def get(self, timeout: Optional[float] = None):
        """The result; re-raises a call's exception; ``multiprocessing.TimeoutError`` on timeout."""
        self.wait(timeout)
        if not self.ready():
            raise TimeoutError
        results = []
        for batch in self._batches:
            for result in batch:
                if isinstance(result, PoolTaskError):
                    raise result.underlying
                if isinstance(result, Exception):
                    raise result
            results.extend(batch)
        return results[0] if self._single_result else results


class IMapIterator:
    """Results of ``imap``/``imap_unordered``: keeps one chunk in flight per actor.

    Each finished chunk lets the next chunk of the input be submitted, so a
    long or endless input is consumed only as fast as results are taken.
    """

    def __init__(self, pool: "Pool", func, iterable, chunksize=None):
        self._pool = pool
        self._func = func
        self._inputs = iter(iterable)
        if isinstance(iterable, collections.abc.Iterator):
            self._chunksize = chunksize or 1
        else:
            self._chunksize = chunksize or pool._calculate_chunksize(iterable)
        self._inputs_exhausted = False
        self._chunk_refs: List[Any] = []  # by chunk index
        self._in_flight: Dict[Any, int] = {}  # ref -> chunk index
        self._fetched: Dict[int, list] = {}  # chunk index -> results, fetched but not yet taken
        self._taken_chunks = 0
        self._ready_values = collections.deque()
        for _ in range(len(pool._actor_pool)):
            self._submit_next_chunk()

    def _submit_next_chunk(self) -> None:
        if self._inputs_exhausted:
            return
        chunk = list(itertools.islice(self._inputs, self._chunksize))
        if len(chunk) < self._chunksize:
            self._inputs_exhausted = True
            if not chunk:
                return
        index = len(self._chunk_refs)
        actor_index = index % len(self._pool._actor_pool)
        ref = self._pool._submit_chunk(self._func, iter(chunk), self._chunksize, actor_index)
        self._chunk_refs.append(ref)
        self._in_flight[ref] = index

    def _all_taken(self) -> bool:
        return self._inputs_exhausted and self._taken_chunks == len(self._chunk_refs)

    def _fetch_one(self, deadline: Optional[float]) -> int:
        """Wait for any in-flight chunk, fetch it, refill the pipeline; return its index."""
        import rayreact as ray

        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError
        index = self._in_flight.pop(ready[0])
        self._fetched[index] = _fetch_batch(ray, ready[0])
        self._submit_next_chunk()
        return index

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def next(self, timeout=None):
        raise NotImplementedError


class OrderedIMapIterator(IMapIterator):
    """``imap``: results in input order."""

    def next(self, timeout=None):
        if not self._ready_values:
            if self._all_taken():
                raise StopIteration
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._taken_chunks not in self._fetched:
                self._fetch_one(deadline)
            while self._taken_chunks in self._fetched:
                self._ready_values.extend(self._fetched.pop(self._taken_chunks))
                self._taken_chunks += 1
        return self._ready_values.popleft()


class UnorderedIMapIterator(IMapIterator):
    """``imap_unordered``: results in the order their chunks finish."""

    def next(self, timeout=None):
        if not self._ready_values:
            if self._all_taken():
                raise StopIteration
            deadline = None if timeout is None else time.monotonic() + timeout
            index = self._fetch_one(deadline)
            self._ready_values.extend(self._fetched.pop(index))
            self._taken_chunks += 1
        return self._ready_values.popleft()


class Pool:
    """A pool of actor processes with the interface of ``multiprocessing.Pool``.

    Args:
        processes: number of actors; default the session's CPU count.
        initializer: run as ``initializer(*initargs)`` in each actor when it starts.
        initargs: arguments of ``initializer``.
        maxtasksperchild: chunks an actor runs before it is replaced (default: no limit).
        context: accepted for compatibility and ignored.
        ray_address: address to ``init`` with when no session runs (also ``RAY_ADDRESS``).
        ray_remote_args: ``.options()`` for the pool's actors.
    """

    def __init__(
        self,
        processes: Optional[int] = None,
        initializer: Optional[Callable] = None,
        initargs: Optional[Iterable] = None,
        maxtasksperchild: Optional[int] = None,
        context: Any = None,
        ray_address: Optional[str] = None,
        ray_remote_args: Optional[Dict[str, Any]] = None,
    ):
        self._closed = False
        self._initializer = initializer
        self._initargs = initargs
        self._maxtasksperchild = maxtasksperchild or -1
        self._retiring: List[Any] = []  # refs of __ray_terminate__ calls of retired actors
        self._ray_remote_args = ray_remote_args or {}
        self._actor_class = None
        self._current_index = 0
        if context:
            import logging

            logging.getLogger(__name__).warning(
                "The 'context' argument is not supported using ray. Please refer to the documentation for how "
                "to control ray initialization.")
        processes = self._init_session(processes, ray_address)
        self._start_actor_pool(processes)

    # -- setup ---------------------------------------------------------------------------

    def _init_session(self, processes, ray_address) -> int:
        import rayreact as ray

        if not ray.is_initialized():
            if ray_address is None and RAY_ADDRESS_ENV in os.environ:
                ray.init(**({"num_cpus": processes} if os.environ[RAY_ADDRESS_ENV] == "local" else {}))
            elif ray_address is not None:
                ray.init(address=ray_address, **({"num_cpus": processes} if ray_address == "local" else {}))
            else:
                ray.init(num_cpus=processes)
        cpus = int(ray.cluster_resources()["CPU"])
        if processes is None:
            processes = cpus
        if processes <= 0:
            raise ValueError("Processes in the pool must be >0.")
        if cpus < processes:
            raise ValueError(f"Tried to start a pool with {processes} processes on an existing ray cluster, "
                             f"but there are only {cpus} CPUs in the ray cluster.")
        return processes

    def _start_actor_pool(self, processes: int) -> None:
        import rayreact as ray

        self._actor_pool: List[Tuple[Any, int]] = [self._new_actor_entry() for _ in range(processes)]
        ray.get([actor.ping.remote() for actor, _ in self._actor_pool])

    def _new_actor_entry(self):
        """A fresh actor and its count of chunks run so far."""
        if self._actor_class is None:
            self._actor_class = _pool_actor_class().options(**self._ray_remote_args)
        return self._actor_class.remote(self._initializer, self._initargs), 0

    # -- retiring actors -----------------------------------------------------------------

    def _wait_for_stopping_actors(self, timeout=None) -> None:
        import rayreact as ray

        if self._retiring:
            _, self._retiring = ray.wait(self._retiring, num_returns=len(self._retiring),
                                         timeout=None if timeout is None else float(timeout))

    def _stop_actor(self, actor) -> None:
        """Let the actor exit after the work already sent to it."""
        self._wait_for_stopping_actors(timeout=0.0)
        self._retiring.append(actor.__ray_terminate__.remote())

    # -- submitting ----------------------------------------------------------------------

    def _next_actor_index(self) -> int:
        self._current_index = (self._current_index + 1) % len(self._actor_pool)
        return self._current_index

    def _run_batch(self, actor_index: int, func, batch):
        actor, count = self._actor_pool[actor_index]
        ref = actor.run_batch.remote(func, batch)
        count += 1
        if count == self._maxtasksperchild:
            self._stop_actor(actor)
            actor, count = self._new_actor_entry()
        self._actor_pool[actor_index] = (actor, count)
        return ref

    def _calculate_chunksize(self, iterable) -> int:
        chunksize, extra = divmod(len(iterable), len(self._actor_pool) * 4)
        return chunksize + 1 if extra else chunksize

    def _submit_chunk(self, func, iterator, chunksize, actor_index, unpack_args=False):
        chunk = [((args if unpack_args else (args,)), {}) for args in itertools.islice(iterator, chunksize)]
        assert chunk, "empty chunk"
        return self._run_batch(actor_index, func, chunk)

    def _chunk_and_run(self, func, iterable, chunksize=None, unpack_args=False) -> list:
        if not hasattr(iterable, "__len__"):
            iterable = list(iterable)
        if chunksize is None:
            chunksize = self._calculate_chunksize(iterable)
        inputs = iter(iterable)
        refs = []
        while len(refs) * chunksize < len(iterable):
            actor_index = len(refs) % len(self._actor_pool)
            refs.append(self._submit_chunk(func, inputs, chunksize, actor_index, unpack_args=unpack_args))
        return refs

    def _map_async(self, func, iterable, chunksize=None, unpack_args=False, callback=None, error_callback=None):
        self._check_running()
        refs = self._chunk_and_run(func, iterable, chunksize=chunksize, unpack_args=unpack_args)
        return AsyncResult(refs, callback, error_callback)

    # -- the multiprocessing.Pool interface ----------------------------------------------

    def apply(self, func: Callable, args: Optional[Tuple] = None, kwargs: Optional[Dict] = None):
        """``func(*args, **kwargs)`` on one of the actors; returns its result."""
        return self.apply_async(func, args, kwargs).get()

    def apply_async(self, func: Callable, args: Optional[Tuple] = None, kwargs: Optional[Dict] = None,
                    callback: Callable[[Any], None] = None, error_callback: Callable[[Exception], None] = None):
        """``func(*args, **kwargs)`` on one of the actors; returns an :class:`AsyncResult`."""
        self._check_running()
        ref = self._run_batch(self._next_actor_index(), func, [(args, kwargs)])
        return AsyncResult([ref], callback, error_callback, single_result=True)

    def map(self, func: Callable, iterable: Iterable, chunksize: Optional[int] = None):
        """``[func(x) for x in iterable]``, computed in chunks on the actors."""
        return self._map_async(func, iterable, chunksize=chunksize).get()

    def map_async(self, func: Callable, iterable: Iterable, chunksize: Optional[int] = None,
                  callback: Callable[[List], None] = None, error_callback: Callable[[Exception], None] = None):
        """:meth:`map` returning an :class:`AsyncResult`; ``callback`` gets the list of results."""
        return self._map_async(func, iterable, chunksize=chunksize, callback=callback,
                               error_callback=error_callback)

    def starmap(self, func, iterable, chunksize=None):
        """``[func(*args) for args in iterable]``."""
        return self._map_async(func, iterable, chunksize=chunksize, unpack_args=True).get()

    def starmap_async(self, func: Callable, iterable: Iterable, callback: Callable[[List], None] = None,
                      error_callback: Callable[[Exception], None] = None):
        """:meth:`starmap` returning an :class:`AsyncResult`."""
        return self._map_async(func, iterable, unpack_args=True, callback=callback, error_callback=error_callback)

    def imap(self, func: Callable, iterable: Iterable, chunksize: Optional[int] = 1):
        """Iterator over ``func(x)`` in input order, with one chunk per actor in flight."""
        self._check_running()
        return OrderedIMapIterator(self, func, iterable, chunksize=chunksize)

    def imap_unordered(self, func: Callable, iterable: Iterable, chunksize: Optional[int] = 1):
        """Like :meth:`imap`, in the order the results finish."""
        self._check_running()
        return UnorderedIMapIterator(self, func, iterable, chunksize=chunksize)

    def _check_running(self) -> None:
        if self._closed:
            raise ValueError("Pool not running")

    def __enter__(self):
        self._check_running()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.terminate()

    def close(self) -> None:
        """Accept no more work; the actors exit once their outstanding work is done."""
        for actor, _ in self._actor_pool:
            self._stop_actor(actor)
        self._closed = True

    def terminate(self) -> None:
        """Accept no more work and kill the actors now."""
        import rayreact as ray

        if not self._closed:
            self.close()
        for actor, _ in self._actor_pool:
            ray.kill(actor)

    def join(self) -> None:
        """Wait for the actors of a closed pool to exit."""
        if not self._closed:
            raise ValueError("Pool is still running")
        self._wait_for_stopping_actors()
