"""``inspect_serializability``: find which part of an object cannot be pickled.

Tries to pickle the object (with cloudpickle, as tasks' arguments are); on
failure it looks inside -- a function's globals and closure variables, an
object's methods and attributes -- down to ``depth`` levels, and reports the
innermost parts that fail on their own.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Set, Tuple

import cloudpickle


class FailureTuple:
    """An unpicklable object, the names leading to it from the inspected object, and its holder."""

    def __init__(self, obj: Any, path: tuple, parent: Any):
        self.obj = obj
        self.path = path
        self.parent = parent

    @property
    def name(self):
        return self.path[-1] if self.path else None

    def __repr__(self):
        names = [str(p) if p is not None else "unknown" for p in self.path]
        return (f"FailTuple({names[-1] if names else 'unknown'} [path={' -> '.join(names)}, obj={self.obj}, "
                f"parent={self.parent}])")


def _pickle_error(obj) -> Optional[Exception]:
    try:
        cloudpickle.dumps(obj)
        return None
    except Exception as e:  # any failure of pickling counts, whatever its type
        return e


def _parts(obj):
    """(name, value) of what pickling ``obj`` would pickle too."""
    if inspect.isfunction(obj):
        closure = inspect.getclosurevars(obj)
        return list(closure.globals.items()) + list(closure.nonlocals.items())
    parts = []
    for name, value in inspect.getmembers(obj):
        if (name.startswith("__") and name.endswith("__")) or inspect.isbuiltin(value):
            continue
        parts.append((name, value))
    return parts


class _Report:
    def __init__(self, print_file):
        self.print_file = print_file
        self.level = 0

    def line(self, text: str) -> None:
        print("    " * self.level + text, file=self.print_file)


def _search(obj, path: tuple, parent, depth: int, failures: Set[FailureTuple], report: _Report) -> bool:
    """True if ``obj`` pickles; otherwise records its innermost failing parts."""
    error = _pickle_error(obj)
    if error is None:
        return True
    report.line(f"!!! FAIL serialization: {error}")
    found_inside = False
    if depth > 0:
        report.level += 1
        for name, value in _parts(obj):
            report.line(f"Serializing '{name}' {value}...")
            if not _search(value, path + (name,), obj, depth - 1, failures, report):
                found_inside = True
                break  # the first culprit at each level is enough to act on
        report.level -= 1
    if not found_inside:
        failures.add(FailureTuple(obj, path, parent))
    return False


def inspect_serializability(base_obj: Any, name: Optional[str] = None, depth: int = 3,
                            print_file: Optional[Any] = None) -> Tuple[bool, Set[FailureTuple]]:
    """Whether ``base_obj`` can be serialized, and the set of parts that prevent it.

    Args:
        base_obj: the object to check.
        name: a name for it in the report.
        depth: how many levels of closures and attributes to look into.
        print_file: where the report is printed (default stdout).
    """
    report = _Report(print_file)
    title = f"Checking Serializability of {base_obj}"
    rule = "=" * min(len(title), 80)
    report.line(rule)
    report.line(title)
    report.line(rule)
    failures: Set[FailureTuple] = set()
    ok = _search(base_obj, (name,) if name is not None else (), None, depth, failures, report)
    if not ok:
        report.line(rule)
        report.line("Variable: \n\n\t" + "\n".join(str(f) for f in failures) + "\n\nwas found to be "
                    "non-serializable. There may be multiple other undetected variables that were non-serializable.")
        report.line("Consider either removing the instantiation/imports of these variables or moving the "
                    "instantiation into the scope of the function/class.")
        report.line(rule)
    return ok, failures
