"""Arity checks at submission, as Ray makes them, without ``Signature.bind`` on the hot path.

``Signature.bind`` costs microseconds per call.  Most calls pass positional
arguments only to a function whose parameters are plain; for those, counting is
enough.  Everything else (keywords, keyword-only parameters) goes through
``bind`` for its exact message.
"""

import inspect

_PLAIN = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class ArityCheck:
    __slots__ = ("signature", "min_positional", "max_positional", "needs_keywords")

    def __init__(self, signature):
        self.signature = signature
        self.min_positional = 0
        self.max_positional = 0
        self.needs_keywords = False  # a keyword-only parameter without a default
        for p in signature.parameters.values():
            if p.kind in _PLAIN:
                self.max_positional += 1  # plain parameters all come before *args
                if p.default is inspect.Parameter.empty:
                    self.min_positional += 1
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                self.max_positional = None
            elif p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
                self.needs_keywords = True

    def check(self, name, args, kwargs):
        """Raise Ray's TypeError if ``name(*args, **kwargs)`` does not fit the signature."""
        if not kwargs and not self.needs_keywords:
            n = len(args)
            if n >= self.min_positional and (self.max_positional is None or n <= self.max_positional):
                return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}() {exc}") from None


def arity_check(signature):
    """An :class:`ArityCheck` for ``signature``, or None when there is none to check against."""
    return None if signature is None else ArityCheck(signature)
