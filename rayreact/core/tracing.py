"""The worker's side of ``RAYREACT_TRACE``: one event per executed user call (see rayreact.core.trace).

Costs nothing when tracing is off: workers hold ``None`` instead of a Tracer.
"""

from __future__ import annotations

import inspect


class Tracer:
    def __init__(self, writer):
        from . import trace
        self._trace = trace
        self._writer = writer
        self._seq = 0
        self.actor_key = None

    @classmethod
    def from_environment(cls):
        from . import trace
        writer = trace.active_writer()
        return None if writer is None else cls(writer)

    def run(self, kind, fn, method, args, kwargs, module, target=None, **extra):
        """Call ``fn(*args, **kwargs)`` inside a trace scope; generators are drained to record their items."""
        if not self._trace.is_user_code(module):
            return _call(fn, args, kwargs)
        if kind == "task":
            target, seq = self._trace.function_target(fn), None
        else:
            target, seq = self.actor_key, self._seq
            self._seq += 1
        with self._trace.executing(self._writer, kind, target, method, seq, args, kwargs, **extra) as scope:
            value = _call(fn, args, kwargs)
            if inspect.isgenerator(value):
                value = list(value)
                scope.set_result_items([self._trace.digest(v) for v in value])
                return value
            scope.set_result(value)
            return value

    def record(self, kind, method, args, kwargs, value, module):
        """Record a call that already ran (async methods run on the actor's loop, outside ``run``)."""
        if not self._trace.is_user_code(module):
            return
        seq = self._seq
        self._seq += 1
        with self._trace.executing(self._writer, kind, self.actor_key, method, seq, args, kwargs) as scope:
            scope.set_result(value)

    def actor_key_for(self, class_name):
        return self._trace.actor_key(class_name)


def _call(fn, args, kwargs):
    import asyncio
    value = fn(*args, **kwargs)
    if inspect.iscoroutine(value):
        value = asyncio.run(value)
    return value


def creating_actor_key(class_name):
    """In the creating process: the key the new actor's events carry (None when tracing is off)."""
    from . import trace
    if trace.active_writer() is None:
        return None
    return trace.actor_key(class_name)
