"""Co-location (opt-in): which actors share a host process, and which host each one goes to.

::

    init(_colocate=True) / RAYREACT_COLOCATE=1 / rayreact run --colocate
    ActorTable._start ──▶ Colocation.host_for(actor, env) ── refused ──▶ None: a process of its own;
                                 │                                       the reason is counted for explain()
                                 └──▶ the live host with the fewest guests, one started while there are
                                      fewer hosts than CPUs ──▶ the actor's worker is a guest there
                                      (core.processes.spawn(host=...), core.hosting in the host process)

Refused, because sharing a process would change what the actor observes or what it may do to others:
an async or threaded actor (its own event loop or thread pool), an actor with GPUs or an env of its own
(``runtime_env``), and a class whose methods assign module globals or its class's attributes.  The
generators of ``random``, numpy and torch are per actor in a host (core.hosting).
"""

from __future__ import annotations

import collections
import dis
import os
import pickle
import types

COLOCATE_VAR = "RAYREACT_COLOCATE"


def wanted_by_environment():
    return os.environ.get(COLOCATE_VAR, "0") not in ("0", "", "false", "off", "no")


def class_refusal(cls):
    """Why instances of ``cls`` may not share a process with other actors (module globals or class attributes
    its methods assign), or None."""
    mro = [c for c in getattr(cls, "__mro__", (cls,)) if c is not object]
    class_names = {c.__name__ for c in mro}
    class_fields = {name for c in mro for name, v in vars(c).items()
                    if not callable(v) and not isinstance(v, (staticmethod, classmethod, property))}
    for c in mro:
        for name, member in vars(c).items():
            fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            code = getattr(fn, "__code__", None)
            if code is None and isinstance(fn, property):
                code = getattr(fn.fset, "__code__", None)
            if code is None:
                continue
            for inner in _codes(code):
                why = _writes_shared(inner, class_names, class_fields)
                if why:
                    return f"{cls.__name__}.{name} {why}"
    return None


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _writes_shared(code, class_names, class_fields):
    names_the_class = False
    stored_fields = []
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            return f"assigns the module global {ins.argval!r}"
        if (op == "LOAD_GLOBAL" and ins.argval in class_names) or \
                (op in ("LOAD_DEREF", "LOAD_ATTR", "LOAD_CLASSDEREF") and ins.argval == "__class__") or \
                (op == "LOAD_GLOBAL" and ins.argval == "type"):
            names_the_class = True
        elif op in ("STORE_ATTR", "DELETE_ATTR") and ins.argval in class_fields:
            stored_fields.append(ins.argval)
    if names_the_class and stored_fields:
        return f"may assign the class attribute {stored_fields[0]!r}"
    return None


class Colocation:
    """The driver's placement of actors on host processes (under the runtime's lock)."""

    def __init__(self, procs, hosts):
        self._procs = procs
        self.hosts_wanted = max(1, int(hosts))
        self._hosts = []
        self._class_refusals = {}        # code id -> class_refusal of the class
        self.placed = collections.Counter()     # (class name, host's worker index) -> actors started there
        self.refused = collections.Counter()    # (class name, reason) -> actors started apart

    def host_for(self, actor, env):
        """The host process for ``actor``'s worker (started if needed), or None if it gets its own."""
        reason = self.refusal(actor, env)
        if reason is not None:
            self.refused[(actor.class_name, reason)] += 1
            return None
        live = [h for h in self._hosts if not h.dead]
        if len(live) < self.hosts_wanted:
            host = self._procs.spawn("host", "Host")
            self._hosts.append(host)
            live.append(host)
        host = min(live, key=lambda h: len(h.guests))
        self.placed[(actor.class_name, host.index)] += 1
        return host

    def refusal(self, actor, env):
        if actor.is_async:
            return "an async actor (its own event loop)"
        if (actor.max_concurrency or 1) > 1:
            return f"a threaded actor (max_concurrency={actor.max_concurrency})"
        if actor.resources.get("GPU"):
            return "a GPU actor"
        if env:
            return "an actor with a runtime_env of its own"
        if actor.code_id not in self._class_refusals:
            try:
                cls = pickle.loads(actor.code)
                why = class_refusal(cls)
            except Exception as exc:  # noqa: BLE001 - a class the driver cannot load is not checked: apart
                why = f"its class could not be checked here ({type(exc).__name__})"
            self._class_refusals[actor.code_id] = why
        return self._class_refusals[actor.code_id]

    def report(self):
        """Lines for explain(): where actors went, and why some went apart."""
        if not self.placed and not self.refused:
            return []
        pids = {h.index: h.pid for h in self._hosts}
        lines = [f"co-location: {sum(self.placed.values())} actor(s) on {len(self._hosts)} host process(es)"]
        for (name, index), n in sorted(self.placed.items()):
            lines.append(f"    {n} x {name} on host pid {pids.get(index)}")
        for (name, reason), n in sorted(self.refused.items()):
            lines.append(f"    {n} x {name} in a process of its own: {reason}")
        return lines
