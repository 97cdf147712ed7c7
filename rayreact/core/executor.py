"""Running one call, the same way in a worker, a replaying reactor and local mode.

::

    host.resolve ─▶ fn(*args) ─▶ await / drain ─▶ split by num_returns ─▶ host.store ─▶ [(key, encoded)]
          │              │                              │
          └──────────────┴──── raised ─▶ fail(): classify, trim the traceback ─▶ one error in every key

The *host* says how arguments arrive and how results leave (duck-typed):

- ``resolve(a, b) -> (args, kwargs)``; raises :class:`DependencyFailed` for an argument that holds an
  error, :class:`Unsubmittable` for an error the submitter must see (local mode runs at ``.remote()``);
- ``store(key, value, is_error=False) -> encoded`` (pure: the caller files the pairs);
- ``run_async(awaitable) -> value``: a sync call that returned a coroutine or an async generator;
- ``stream_item(stream_id, index, value, keep) -> key``: one yielded item of a streaming/dynamic call;
- ``interrupt_cancels``: KeyboardInterrupt is ``ray.cancel`` (tasks); ``user_errors_only``: anything
  that is not an ``Exception`` propagates (local mode: Ctrl-C and ``sys.exit`` belong to the driver);
  ``end_process(code)``: ``sys.exit`` in a task ends the worker process (it does not return);
  ``current_task_id``, ``actor_id``.

:func:`run` and :func:`run_async` return ``(results, status)``; ``status <= PARTIAL`` is a final success.
"""

from __future__ import annotations

import inspect
import os
import traceback
import types

from .. import exceptions
from . import generator_returns

OK = 0          # every key holds a value
PARTIAL = 1     # a generator filled some keys, then raised: final (Ray never retries it), the rest hold the error
RAISED = 2      # the user's code (or its result's encoding) raised: every key holds the RayTaskError
FAILED = 3      # not the call's own doing (an argument's error, a cancel): every key holds that error
EXITED = 4      # the actor ends: exit_actor(), __ray_terminate__ or SystemExit

STREAMING = -1  # submission.STREAMING: the stream id ends up holding the item count

# Results of these types cannot be awaitable or generators: the common case skips every inspect check.
_PLAIN = frozenset([int, float, bool, str, bytes, type(None), tuple, list, dict])
_CoroutineType = types.CoroutineType
_GeneratorType = types.GeneratorType

_CORE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OUR_SUFFIXES = (os.path.join("rayreact", "core", "reactor.pyx"),)

EXIT_MESSAGE = ("The actor died because it called exit_actor() (or __ray_terminate__) and this call "
                "did not return a value.")


class DependencyFailed(Exception):
    """An argument's value is an error: the call does not run, and every key gets that error as is."""

    def __init__(self, error):
        self.error = error


class Unsubmittable(Exception):
    """Raised by ``resolve`` for an error that belongs to the submitter; :func:`run` re-raises ``error``."""

    def __init__(self, error):
        self.error = error


def run(host, name, fn, a, b, keys, num_returns, actor=None):
    """Resolve, call ``fn``, encode: ``(results, status)``.  ``actor``: the instance, for an actor's call."""
    try:
        args, kwargs = host.resolve(a, b)
        value = fn(*args, **kwargs)
        args = kwargs = None            # the arguments' views go before the results are encoded
        if num_returns == 1 and type(value) in _PLAIN:
            return [(keys[0], host.store(keys[0], value))], OK
        if type(value) is _CoroutineType:
            value = host.run_async(value)
        elif inspect.isasyncgen(value):
            value = host.run_async(_drain(value))
        return _outputs(host, name, keys, value, num_returns, actor)
    except BaseException as exc:  # noqa: BLE001 - fail() sorts out what propagates
        return fail(host, name, exc, keys, actor)


async def run_async(host, name, fn, a, b, keys, num_returns, actor=None):
    """:func:`run` for an asyncio actor: the call's coroutine is awaited on the actor's loop."""
    try:
        args, kwargs = host.resolve(a, b)
        value = fn(*args, **kwargs)
        args = kwargs = None
        if inspect.iscoroutine(value):
            value = await value
        elif inspect.isasyncgen(value):
            value = await _drain(value)
        return _outputs(host, name, keys, value, num_returns, actor)
    except BaseException as exc:  # noqa: BLE001
        return fail(host, name, exc, keys, actor)


async def _drain(agen):
    return [item async for item in agen]


def _outputs(host, name, keys, value, num_returns, actor):
    """Spread a call's value over its keys by Ray's ``num_returns`` rules."""
    if num_returns < 0:
        return _stream(host, keys[0], value, num_returns), OK
    if num_returns >= 1 and type(value) is _GeneratorType:
        values, error = generator_returns.draw(value, num_returns)
        results = [(k, host.store(k, v)) for k, v in zip(keys, values)]
        if error is None:
            return results, OK
        return results + everywhere(host, keys[len(values):], task_error(host, name, error, actor)), PARTIAL
    if num_returns == 1:
        return [(keys[0], host.store(keys[0], value))], OK
    if num_returns == 0:
        return [], OK
    count = len(value)      # as in Ray: a value without a length fails with len()'s own TypeError
    if count != num_returns:
        raise ValueError(f"Task returned {count} objects, but num_returns={num_returns}.")
    return [(k, host.store(k, v)) for k, v in zip(keys, value)], OK


def _stream(host, stream_id, value, num_returns):
    """Each yielded item leaves as it comes; the stream id finally holds the count (or the ref generator)."""
    keep = num_returns == STREAMING
    item_ids = []
    for item in value:
        item_ids.append(host.stream_item(stream_id, len(item_ids), item, keep))
    if keep:
        return [(stream_id, host.store(stream_id, len(item_ids)))]
    from .refs import DynamicObjectRefGenerator, ObjectRef
    return [(stream_id, host.store(stream_id, DynamicObjectRefGenerator([ObjectRef(o) for o in item_ids])))]


def fail(host, name, exc, keys, actor=None):
    """``(results, status)`` for a call that raised ``exc`` (or re-raise what is not the call's to report)."""
    kind = type(exc)
    if kind is DependencyFailed:
        return everywhere(host, keys, exc.error), FAILED
    if kind is Unsubmittable:
        raise exc.error from None
    if not isinstance(exc, Exception):
        if host.user_errors_only:
            raise exc
        if issubclass(kind, KeyboardInterrupt) and host.interrupt_cancels:
            return everywhere(host, keys, exceptions.TaskCancelledError(host.current_task_id.hex())), FAILED
        if issubclass(kind, SystemExit):
            if actor is not None:
                return exited(host, keys)
            # As in Ray, sys.exit() in a task ends its worker: the caller sees the worker's death
            # (a retry, then WorkerCrashedError), never a RayTaskError that is itself a SystemExit.
            host.end_process(exc.code)
    elif actor is not None and isinstance(exc, exceptions.AsyncioActorExit):
        return exited(host, keys)
    return everywhere(host, keys, task_error(host, name, exc, actor)), RAISED


def exited(host, keys):
    """The call that ended its actor reports the actor's death (even if it caught the SystemExit)."""
    return everywhere(host, keys, exceptions.ActorDiedError(error_msg=EXIT_MESSAGE)), EXITED


def task_error(host, name, exc, actor=None):
    """A ``RayTaskError`` for ``exc``, its remote traceback starting at the user's first frame."""
    tb = exc.__traceback__
    while tb is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    actor_id = host.actor_id if actor is not None else None
    return exceptions.RayTaskError(name, text, exc, proctitle=f"ray::{name}", pid=os.getpid(),
                                   actor_repr=(repr(actor) if actor is not None else None),
                                   actor_id=(actor_id.hex() if actor_id else None))


def _ours(filename):
    return filename.startswith(_CORE_DIR) or filename.endswith(_OUR_SUFFIXES)


def everywhere(host, keys, err):
    """One encoding of ``err`` for every key; an exception that cannot be pickled travels as its repr."""
    if not keys:
        return []
    try:
        encoded = host.store(keys[0], err, True)
    except Exception as why:
        if not isinstance(err, exceptions.RayTaskError):
            raise
        encoded = host.store(keys[0], _unpicklable(err, why), True)
    return [(k, encoded) for k in keys]


def _unpicklable(err, why):
    """Ray's stand-in for a user exception that cannot be pickled: a ``RayError`` that names it and keeps
    its traceback (so ``get`` raises a plain ``RayTaskError``, not an instance of the user's class)."""
    kind = type(err.cause)
    reason = why.__cause__ if why.__cause__ is not None else why
    stand_in = exceptions.RayError(f"Exception {kind.__module__}.{kind.__qualname__} isn't serializable: {reason}.\n"
                                   f"Original exception details:\n{err.traceback_str}")
    return exceptions.RayTaskError(err.function_name, err.traceback_str, stand_in, err.proctitle, err.pid, err.ip,
                                   err.actor_repr, err._actor_id)


def traced(tracer, kind, fn, method, module):
    """``rayreact compare``: the call runs inside the tracer, which records its arguments and result."""
    def run_traced(*args, **kwargs):
        return tracer.run(kind, fn, method, args, kwargs, module)
    return run_traced
