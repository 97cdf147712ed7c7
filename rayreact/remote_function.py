"""RemoteFunction: what ``@remote`` makes of a function."""

from __future__ import annotations

import functools
import inspect

from ._arity import arity_check
from . import options as _options
from .core import context


class RemoteFunction:
    """Call with ``.remote(...)``; configure a copy with ``.options(...)``."""

    def __init__(self, function, task_options: dict):
        if inspect.iscoroutinefunction(function):
            pass  # Ray runs async remote functions to completion in the worker; so do we.
        self._function = function
        self._default_options = task_options
        self._signature = _safe_signature(function)
        self._arity = arity_check(self._signature)
        generator = inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)
        self._default_num_returns = "streaming" if generator else 1
        self._function_name = f"{function.__module__}.{function.__qualname__}"
        self._code_id = None          # the runtime's id of its pickled code, once first shipped (core.submission)
        self._code_pickle = None
        self._ray_twin = None         # real-Ray delegate, built on demand
        functools.update_wrapper(self, function, updated=())

    def __call__(self, *args, **kwargs):
        raise TypeError("Remote functions cannot be called directly. Instead of running "
                        f"'{self._function_name}()', try '{self._function_name}.remote()'.")

    def remote(self, *args, **kwargs):
        return self._remote(args, kwargs, self._default_options)

    def options(self, **task_options):
        _options.validate_task_options(task_options, in_options=True)
        merged = {**self._default_options, **task_options}
        parent = self

        class _FunctionWithOptions:
            def remote(self, *args, **kwargs):
                return parent._remote(args, kwargs, merged)

            def options(self, **more):
                return parent.options(**{**task_options, **more})

            def bind(self, *args, **kwargs):
                raise NotImplementedError("DAG building (.bind) is not supported by rayreact")

        return _FunctionWithOptions()

    def bind(self, *args, **kwargs):
        raise NotImplementedError("DAG building (.bind) is not supported by rayreact")

    def _remote(self, args, kwargs, task_options):
        if self._arity is not None:
            self._arity.check(self._function.__qualname__, args, kwargs)
        return context.runtime().submit_task(self, args, kwargs, task_options)

    def __reduce__(self):
        return (RemoteFunction, (self._function, self._default_options))


def _safe_signature(function):
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None
