"""``Queue``: a FIFO queue held by an async actor, shareable between tasks and actors.

Same interface and errors as ``ray.util.queue`` in Ray 2.60. The queue lives in
an async actor so that blocked ``put``/``get`` calls wait inside the actor
without holding up other callers; the ``Queue`` object itself is only a handle
and can be passed to tasks and actors.

Errors as Ray raises them: the non-blocking calls raise ``Full``/``Empty``
themselves; a blocking call that times out, or a batch call that does not fit,
raises the actor's error, which ``get`` turns into an instance of both
``RayTaskError`` and ``Full``/``Empty`` -- so ``except Empty`` works everywhere.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Iterable
from typing import Any, Dict, List, Optional

__all__ = ["Queue", "Empty", "Full"]


class Empty(queue.Empty):
    pass


class Full(queue.Full):
    pass


def _check_timeout(timeout: Optional[float]) -> None:
    if timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")


class Queue:
    """A first-in, first-out queue shared through an actor.

    Args:
        maxsize: the most items the queue holds; 0 means unbounded.
        actor_options: keyword options for the queue actor, as for ``.options()``
            (for example ``{"num_cpus": 1}``).
    """

    def __init__(self, maxsize: int = 0, actor_options: Optional[Dict] = None) -> None:
        self.maxsize = maxsize
        self.actor = _queue_actor_class().options(**(actor_options or {})).remote(maxsize)

    def __len__(self) -> int:
        return self.size()

    def size(self) -> int:
        """The number of items in the queue."""
        import rayreact as ray

        return ray.get(self.actor.qsize.remote())

    def qsize(self) -> int:
        """The number of items in the queue."""
        return self.size()

    def empty(self) -> bool:
        """Whether the queue holds no item."""
        import rayreact as ray

        return ray.get(self.actor.empty.remote())

    def full(self) -> bool:
        """Whether the queue holds ``maxsize`` items."""
        import rayreact as ray

        return ray.get(self.actor.full.remote())

    def put(self, item: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        """Add an item, waiting up to ``timeout`` seconds (forever if None) for room.

        Raises ``Full`` when there is no room and ``block`` is False or the wait
        timed out; ``ValueError`` for a negative timeout.
        """
        import rayreact as ray

        if not block:
            try:
                ray.get(self.actor.put_nowait.remote(item))
            except asyncio.QueueFull:
                raise Full
            return
        _check_timeout(timeout)
        ray.get(self.actor.put.remote(item, timeout))

    async def put_async(self, item: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        """:meth:`put` for use inside a coroutine."""
        if not block:
            try:
                await self.actor.put_nowait.remote(item)
            except asyncio.QueueFull:
                raise Full
            return
        _check_timeout(timeout)
        await self.actor.put.remote(item, timeout)

    def get(self, block: bool = True, timeout: Optional[float] = None) -> Any:
        """Remove and return the oldest item, waiting up to ``timeout`` seconds for one.

        Raises ``Empty`` when there is none and ``block`` is False or the wait
        timed out; ``ValueError`` for a negative timeout.
        """
        import rayreact as ray

        if not block:
            try:
                return ray.get(self.actor.get_nowait.remote())
            except asyncio.QueueEmpty:
                raise Empty
        _check_timeout(timeout)
        return ray.get(self.actor.get.remote(timeout))

    async def get_async(self, block: bool = True, timeout: Optional[float] = None) -> Any:
        """:meth:`get` for use inside a coroutine."""
        if not block:
            try:
                return await self.actor.get_nowait.remote()
            except asyncio.QueueEmpty:
                raise Empty
        _check_timeout(timeout)
        return await self.actor.get.remote(timeout)

    def put_nowait(self, item: Any) -> None:
        """``put(item, block=False)``."""
        return self.put(item, block=False)

    def put_nowait_batch(self, items: Iterable) -> None:
        """Add all items in order, or none of them (``Full``) if they do not all fit."""
        import rayreact as ray

        if not isinstance(items, Iterable):
            raise TypeError("Argument 'items' must be an Iterable")
        ray.get(self.actor.put_nowait_batch.remote(items))

    def get_nowait(self) -> Any:
        """``get(block=False)``."""
        return self.get(block=False)

    def get_nowait_batch(self, num_items: int) -> List[Any]:
        """Remove and return the ``num_items`` oldest items, or none (``Empty``) if fewer are queued."""
        import rayreact as ray

        if not isinstance(num_items, int):
            raise TypeError("Argument 'num_items' must be an int")
        if num_items < 0:
            raise ValueError("'num_items' must be nonnegative")
        return ray.get(self.actor.get_nowait_batch.remote(num_items))

    def shutdown(self, force: bool = False, grace_period_s: int = 5) -> None:
        """Stop the queue actor, releasing its resources; the queue is unusable afterwards.

        Unless ``force``, the actor first finishes the calls already sent to it,
        and is killed only if that takes longer than ``grace_period_s`` seconds.
        """
        import rayreact as ray

        if self.actor:
            if force:
                ray.kill(self.actor, no_restart=True)
            else:
                done = self.actor.__ray_terminate__.remote()
                _, not_done = ray.wait([done], timeout=grace_period_s)
                if not_done:
                    ray.kill(self.actor, no_restart=True)
        self.actor = None


class _QueueActor:
    """The actor that holds the items; async so waiting callers do not block others."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.queue = asyncio.Queue(maxsize)

    def qsize(self) -> int:
        return self.queue.qsize()

    def empty(self) -> bool:
        return self.queue.empty()

    def full(self) -> bool:
        return self.queue.full()

    async def put(self, item, timeout=None):
        try:
            await asyncio.wait_for(self.queue.put(item), timeout)
        except asyncio.TimeoutError:
            raise Full

    async def get(self, timeout=None):
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise Empty

    def put_nowait(self, item) -> None:
        self.queue.put_nowait(item)

    def put_nowait_batch(self, items) -> None:
        items = list(items)
        if self.maxsize > 0 and len(items) + self.queue.qsize() > self.maxsize:
            raise Full(f"Cannot add {len(items)} items to queue of size {self.queue.qsize()} "
                       f"and maxsize {self.maxsize}.")
        for item in items:
            self.queue.put_nowait(item)

    def get_nowait(self):
        return self.queue.get_nowait()

    def get_nowait_batch(self, num_items: int) -> list:
        if num_items > self.queue.qsize():
            raise Empty(f"Cannot get {num_items} items from queue of size {self.queue.qsize()}.")
        return [self.queue.get_nowait() for _ in range(num_items)]


_actor_class = None


def _queue_actor_class():
    """The remote class of the queue actor, built once (``remote`` must not run at import)."""
    global _actor_class
    if _actor_class is None:
        import rayreact as ray

        _actor_class = ray.remote(_QueueActor)
    return _actor_class
