"""Exceptions with the names, bases and behaviour of ``ray.exceptions``.

``except ray.exceptions.X`` clauses in user code must resolve against rayreact,
so every public class of Ray's module exists here with the same bases.  The
one with real behaviour is :class:`RayTaskError`: ``get`` raises it as an
instance of *both* ``RayTaskError`` and the user's exception class, carrying
the remote traceback in its message and the original exception as ``cause``
(also chained as ``__cause__``).
"""

from __future__ import annotations

import os


class RayError(Exception):
    """Base of every error rayreact raises on behalf of remote work."""


class CrossLanguageError(RayError):
    pass


class TaskCancelledError(RayError):
    def __init__(self, task_id=None, error_message=None):
        self.task_id = task_id
        self.error_message = error_message

    def __str__(self):
        if self.error_message:
            return self.error_message
        return "This task or its dependency was cancelled by" + (f" {self.task_id}" if self.task_id else "")


class RayTaskError(RayError):
    """A remote function or actor method raised.

    Built on the worker from the live exception, pickled to the caller, and
    turned into a dual instance by :meth:`as_instanceof_cause` at ``get``.
    """

    def __init__(self, function_name, traceback_str, cause, proctitle=None, pid=None, ip=None,
                 actor_repr=None, actor_id=None):
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause
        self.proctitle = proctitle or f"ray::{function_name}"
        self.pid = pid if pid is not None else os.getpid()
        self.ip = ip or "127.0.0.1"
        self.actor_repr = actor_repr
        self._actor_id = actor_id
        self.args = (function_name, traceback_str, cause, proctitle, pid, ip)

    def __reduce__(self):
        # The cause travels as its own pickle: a receiver that cannot load it (its class is not importable
        # there, or its constructor wants other arguments) still has the traceback, as in Ray.
        import cloudpickle
        return (_unpickle_task_error, (self.function_name, self.traceback_str, cloudpickle.dumps(self.cause),
                                       self.proctitle, self.pid, self.ip, self.actor_repr, self._actor_id))

    def __str__(self):
        head = f"{type(self.cause).__name__ if self.cause is not None else 'RayTaskError'}: " \
            if False else ""
        out = [f"{head}{self.proctitle}() (pid={self.pid}, ip={self.ip}"
               + (f", actor_id={self._actor_id}, repr={self.actor_repr})" if self._actor_id else ")")]
        out.append(self.traceback_str.rstrip("\n"))
        return "\n".join(out)

    def as_instanceof_cause(self):
        """Return an exception that is both a ``RayTaskError`` and an instance of the cause's class."""
        cause = self.cause
        if cause is None or not isinstance(cause, BaseException):
            return self
        cause_cls = type(cause)
        if issubclass(RayTaskError, cause_cls):
            return self
        try:
            dual = _dual_class(cause_cls)
            inst = dual.__new__(dual)
        except TypeError:
            return self
        # Copy the task error's fields and the user's exception state onto one object.
        try:
            inst.__dict__.update(getattr(cause, "__dict__", {}))
        except (AttributeError, TypeError):
            pass
        inst.args = cause.args
        inst.function_name = self.function_name
        inst.traceback_str = self.traceback_str
        inst.cause = cause
        inst.proctitle = self.proctitle
        inst.pid = self.pid
        inst.ip = self.ip
        inst.actor_repr = self.actor_repr
        inst._actor_id = self._actor_id
        inst._message = RayTaskError.__str__(self)
        inst.__cause__ = cause
        return inst


_DUAL_CLASSES: dict = {}


def _dual_class(cause_cls):
    dual = _DUAL_CLASSES.get(cause_cls)
    if dual is None:
        name = f"RayTaskError({cause_cls.__name__})"

        def __str__(self):
            return self._message

        def __getattr__(self, attr):
            cause = self.__dict__.get("cause")
            if cause is None:
                raise AttributeError(attr)
            return getattr(cause, attr)

        def __reduce__(self):
            return (_rebuild_task_error, (RayTaskError(self.function_name, self.traceback_str, self.cause,
                                                       self.proctitle, self.pid, self.ip, self.actor_repr,
                                                       self._actor_id),))

        dual = type(name, (RayTaskError, cause_cls), {
            "__str__": __str__, "__getattr__": __getattr__, "__reduce__": __reduce__,
            "__init__": lambda self, *a, **k: None, "__module__": cause_cls.__module__,
        })
        dual.__qualname__ = name
        _DUAL_CLASSES[cause_cls] = dual
    return dual


def _rebuild_task_error(err):
    return err.as_instanceof_cause()


def _unpickle_task_error(function_name, traceback_str, pickled_cause, *rest):
    import pickle
    try:
        cause = pickle.loads(pickled_cause)
    except Exception:       # noqa: BLE001 - whatever loading the user's class raises
        err = RayTaskError(function_name, traceback_str, None, *rest)
        return UnserializableException(f"{RayTaskError.__module__}.RayTaskError: {err}")
    return RayTaskError(function_name, traceback_str, cause, *rest)


class LocalRayletDiedError(RayError):
    def __str__(self):
        return "The task's local raylet died. Check raylet.out for more information."


class WorkerCrashedError(RayError):
    def __init__(self, message=None):
        self.message = message

    def __str__(self):
        return self.message or ("The worker died unexpectedly while executing this task. Check python-core-worker-*.log "
                                "files for more information.")


class RayActorError(RayError):
    """The actor died before or while running this call."""

    def __init__(self, cause=None, actor_id=None, error_msg=None):
        self.actor_id = actor_id
        self._cause = cause
        self.error_msg = error_msg or (cause if isinstance(cause, str) else
                                       "The actor died unexpectedly before finishing this task.")
        self.args = (self.error_msg,)

    def __reduce__(self):
        return (type(self), (self._cause if isinstance(self._cause, str) else None, self.actor_id, self.error_msg))

    def __str__(self):
        return self.error_msg


class ActorDiedError(RayActorError):
    BASE_ERROR_MSG = "The actor died unexpectedly before finishing this task."


class ActorUnavailableError(RayActorError):
    pass


class RaySystemError(RayError):
    def __init__(self, client_exc=None, traceback_str=None):
        self.client_exc = client_exc
        self.traceback_str = traceback_str

    def __str__(self):
        return f"System error: {self.client_exc}" + (f"\ntraceback: {self.traceback_str}" if self.traceback_str else "")


class AuthenticationError(RayError):
    pass


class UserCodeException(RayError):
    pass


class ObjectStoreFullError(RayError):
    pass


class OutOfDiskError(RayError):
    pass


class OutOfMemoryError(RayError):
    pass


class NodeDiedError(RayError):
    pass


class ObjectLostError(RayError):
    def __init__(self, object_ref_hex="", owner_address="", call_site=""):
        self.object_ref_hex = object_ref_hex
        self.owner_address = owner_address
        self.call_site = call_site

    def _base_str(self):
        return f"Failed to retrieve object {self.object_ref_hex}. "

    def __str__(self):
        return self._base_str() + "All copies of the object are lost."


class ObjectFetchTimedOutError(ObjectLostError):
    def __str__(self):
        return self._base_str() + "Fetch for object timed out because no locations were found for the object."


class RpcError(RayError):
    def __init__(self, message="", rpc_code=None):
        self.message = message
        self.rpc_code = rpc_code

    def __str__(self):
        return self.message


class ReferenceCountingAssertionError(ObjectLostError, AssertionError):
    def __str__(self):
        return self._base_str() + "The object has already been deleted by the reference counting protocol."


class ObjectFreedError(ObjectLostError):
    def __str__(self):
        return self._base_str() + "The object was manually freed using the internal `free` call."


class OwnerDiedError(ObjectLostError):
    def __str__(self):
        return self._base_str() + "The object's owner has exited (the worker that created it died)."


class ObjectReconstructionFailedError(ObjectLostError):
    pass


class ObjectReconstructionFailedMaxAttemptsExceededError(ObjectLostError):
    pass


class ObjectReconstructionFailedLineageEvictedError(ObjectLostError):
    pass


class GetTimeoutError(RayError, TimeoutError):
    """``get`` ran past its ``timeout``."""


class PlasmaObjectNotAvailable(RayError):
    pass


class AsyncioActorExit(RayError):
    pass


class RuntimeEnvSetupError(RayError):
    def __init__(self, error_message=None):
        self.error_message = error_message

    def __str__(self):
        return f"Failed to set up runtime environment.\n{self.error_message}"


class TaskPlacementGroupRemoved(RayError):
    pass


class ActorPlacementGroupRemoved(RayError):
    pass


class PendingCallsLimitExceeded(RayError):
    pass


class TaskUnschedulableError(RayError):
    def __init__(self, error_message=""):
        self.error_message = error_message

    def __str__(self):
        return f"The task is not schedulable: {self.error_message}"


class ActorUnschedulableError(RayError):
    def __init__(self, error_message=""):
        self.error_message = error_message

    def __str__(self):
        return f"The actor is not schedulable: {self.error_message}"


class ObjectRefStreamEndOfStreamError(RayError):
    pass


class StreamingGeneratorReplayInconsistentError(RaySystemError):
    pass


class OufOfBandObjectRefSerializationException(RayError):
    pass


class RayChannelError(RaySystemError):
    pass


class RayChannelTimeoutError(RayChannelError, TimeoutError):
    pass


class RayCgraphCapacityExceeded(RaySystemError):
    pass


class RayDirectTransportError(RaySystemError):
    pass


class UnserializableException(RayError):
    def __init__(self, original_stack_trace=""):
        self.original_stack_trace = original_stack_trace

    def __str__(self):
        return ("Failed to deserialize exception. Refer to https://docs.ray.io/en/latest/ray-core/objects/"
                "serialization.html#custom-serializers-for-exceptions for more information.\n"
                "Original exception:\n" + self.original_stack_trace)


class ActorAlreadyExistsError(ValueError, RayError):
    pass


class ActorHandleNotFoundError(ValueError, RayError):
    pass


class ForkedSessionError(RuntimeError):
    """rayreact's own: an API call in a child forked from a process that has a session (the session,
    its rings and workers, belong to the parent; the child may start its own with ``init()``)."""


RAY_EXCEPTION_TYPES = [
    RayError, RayTaskError, WorkerCrashedError, RayActorError, ObjectStoreFullError,
    ObjectLostError, ObjectFetchTimedOutError, ReferenceCountingAssertionError, ObjectReconstructionFailedError,
    ObjectReconstructionFailedMaxAttemptsExceededError, ObjectReconstructionFailedLineageEvictedError,
    OwnerDiedError, GetTimeoutError, AsyncioActorExit, RuntimeEnvSetupError, TaskPlacementGroupRemoved,
    ActorPlacementGroupRemoved, PendingCallsLimitExceeded, LocalRayletDiedError, TaskUnschedulableError,
    ActorDiedError, ActorUnschedulableError, ActorUnavailableError, RayChannelError, RayChannelTimeoutError,
    OufOfBandObjectRefSerializationException, RayCgraphCapacityExceeded, UnserializableException,
]
