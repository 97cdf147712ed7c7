"""``as_completed`` and ``map_unordered``: iterate over results as they finish (``ray.util.helpers``)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, Sequence

DEFAULT_CHUNK_SIZE = 10
DEFAULT_BACKPRESSURE_SIZE = 100


def _check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError("`chunk_size` must be >= 1")


def _next_ready_batch(refs: list, chunk_size: int, yield_obj_refs: bool, wait_kwargs: dict):
    """Wait for up to ``chunk_size`` refs; return (their values or refs, the refs still pending)."""
    import rayreact as ray

    _check_chunk_size(chunk_size)
    ready, pending = ray.wait(refs, num_returns=min(chunk_size, len(refs)), **wait_kwargs)
    return (ready if yield_obj_refs else ray.get(ready)), pending


def as_completed(refs: Sequence, *, chunk_size: int = DEFAULT_CHUNK_SIZE, yield_obj_refs: bool = False,
                 **kwargs) -> Iterator[Any]:
    """Yield the results of ``refs`` in batches of ``chunk_size`` as they become ready.

    Extra keywords (``timeout``, ``fetch_local``) go to ``wait``.
    """
    _check_chunk_size(chunk_size)
    if "num_returns" in kwargs:
        raise ValueError("Use the `chunksize` argument instead of `num_returns`.")
    refs = list(refs)
    while refs:
        results, refs = _next_ready_batch(refs, chunk_size, yield_obj_refs, kwargs)
        yield from results


def map_unordered(fn, items: Iterable[Any], *, backpressure_size: Optional[int] = DEFAULT_BACKPRESSURE_SIZE,
                  chunk_size: int = DEFAULT_CHUNK_SIZE, yield_obj_refs: bool = False, **kwargs) -> Iterator[Any]:
    """Yield ``fn.remote(item)`` results as they finish, with at most ``backpressure_size`` in flight."""
    if backpressure_size is None:
        backpressure_size = float("inf")
    elif backpressure_size <= 0:
        raise ValueError("backpressure_size must be positive.")
    _check_chunk_size(chunk_size)
    if "num_returns" in kwargs:
        raise ValueError("Use the `chunk_size` argument instead of `num_returns`.")
    refs = []
    for item in items:
        refs.append(fn.remote(item))
        if len(refs) >= backpressure_size:
            results, refs = _next_ready_batch(refs, chunk_size, yield_obj_refs, kwargs)
            yield from results
    yield from as_completed(refs, chunk_size=chunk_size, yield_obj_refs=yield_obj_refs, **kwargs)
