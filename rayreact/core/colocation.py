"""Co-location (opt-in): which actors share a host process, and which host each one goes to.

::

    init(_colocate=True) / RAYREACT_COLOCATE=1 / rayreact run --colocate
    ActorTable._start ──▶ Colocation.host_for(actor, env) ── refused ──▶ None: a process of its own;
                                 │                                       the reason is counted for explain()
                                 └──▶ the live host with the fewest guests, one started while there are
                                      fewer hosts than CPUs ──▶ the actor's worker is a guest there
                                      (core.processes.spawn(host=...), core.hosting in the host process)

A replayed loop's task calls run in a host too, beside the actors they exchange values with (core.replay
asks ``live_hosts`` and ``task_refusal``), unless their function writes what the host's actors share.

Refused, because sharing a process would change what the actor observes or what it may do to others:
an async or threaded actor (its own event loop or thread pool), an actor with GPUs or an env of its own
(``runtime_env``), and a class whose methods assign module globals or its class's attributes or mutate
a module-level or class-level container (a bytecode scan: ``class_refusal``; state reached in other ways,
a mutable object held by another module say, is shared unnoticed).  The
generators of ``random``, numpy and torch are per actor in a host (core.hosting).
"""

from __future__ import annotations

import collections
import dis
import inspect
import os
import pickle
import types

COLOCATE_VAR = "RAYREACT_COLOCATE"


def wanted_by_environment():
    return os.environ.get(COLOCATE_VAR, "0") not in ("0", "", "false", "off", "no")


_MUTABLE = (list, dict, set, bytearray, collections.deque, collections.Counter, collections.OrderedDict,
            collections.defaultdict)
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add",
                       "discard", "popitem", "appendleft", "extendleft", "popleft", "sort", "reverse",
                       "__setitem__", "__delitem__"})
_CLASS_LOADS = ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF")


def class_refusal(cls):
    """Why instances of ``cls`` may not share a process with other actors, or None: its methods assign
    module globals or its class's attributes, or mutate a module-level or class-level container (a list,
    dict, set...), all of which every actor in the process would share."""
    mro = [c for c in getattr(cls, "__mro__", (cls,)) if c is not object]
    class_names = {c.__name__ for c in mro}
    for c in mro:
        for name, v in vars(c).items():
            if isinstance(v, _MUTABLE) and not name.startswith("__"):
                return f"{cls.__name__} has a class-level {type(v).__name__} {name!r} its instances would share"
    for c in mro:
        for name, member in vars(c).items():
            is_classmethod = isinstance(member, classmethod)
            fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            if isinstance(fn, property):
                fn = fn.fset
            fn = inspect.unwrap(fn) if callable(fn) else fn       # (decorated: @torch.no_grad(), wraps)
            code = getattr(fn, "__code__", None)
            if code is None:
                continue
            module_globals = getattr(fn, "__globals__", {})
            for inner in _codes(code):
                why = _writes_shared(inner, class_names, is_classmethod, module_globals)
                if why:
                    return f"{cls.__name__}.{name} {why}"
    return None


def function_refusal(fn):
    """Why calls of ``fn`` may not run in a process that hosts actors, or None: it assigns module globals or
    mutates a module-level container, which the actors there would see."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    module_globals = getattr(fn, "__globals__", {})
    for inner in _codes(code):
        why = _writes_shared(inner, (), False, module_globals) or _ends_or_sets_globally(inner)
        if why:
            return f"{fn.__qualname__} {why}"
    return None


_EXITS = frozenset({"exit", "quit", "SystemExit", "_exit"})


def _ends_or_sets_globally(code):
    """A task's own reach beyond its call: ending its process (which a host shares with its actors), or
    assigning an attribute of a module-level object (a class, a module, a config)."""
    ins = list(dis.get_instructions(code))
    for k, i in enumerate(ins):
        if i.opname == "LOAD_GLOBAL" and i.argval in _EXITS:
            return f"may end its process ({i.argval})"
        if i.opname in ("LOAD_ATTR", "LOAD_METHOD") and i.argval in _EXITS and k and \
                ins[k - 1].opname == "LOAD_GLOBAL" and ins[k - 1].argval in ("sys", "os"):
            return f"may end its process ({ins[k - 1].argval}.{i.argval})"
        if i.opname in ("STORE_ATTR", "DELETE_ATTR") and k and ins[k - 1].opname == "LOAD_GLOBAL":
            return f"assigns an attribute of the module-level {ins[k - 1].argval!r}"
    return None


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _loads_class(ins, at, class_names, is_classmethod):
    """Whether instruction ``at`` leaves the class on the stack: ``Cls``, ``self.__class__``, ``cls`` in a
    classmethod, ``type(self)``."""
    i = ins[at]
    if i.opname in _CLASS_LOADS and i.argval in class_names:
        return True
    if i.argval == "__class__" and i.opname in ("LOAD_ATTR", "LOAD_DEREF", "LOAD_CLASSDEREF"):
        return True
    if is_classmethod and i.opname == "LOAD_FAST" and i.argval == "cls":
        return True
    if i.opname == "CALL" and i.argval == 1:
        return any(p.opname == "LOAD_GLOBAL" and p.argval == "type" for p in ins[max(0, at - 4):at])
    return False


def _writes_shared(code, class_names, is_classmethod, module_globals):
    ins = list(dis.get_instructions(code))
    for k, i in enumerate(ins):
        op = i.opname
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            return f"assigns the module global {i.argval!r}"
        if op in ("STORE_ATTR", "DELETE_ATTR") and k:
            owner = k - 1
            if ins[owner].opname == "SWAP":
                # ``Cls.x += 1``: the class, COPY, LOAD_ATTR x, <operand>, BINARY_OP, SWAP, STORE_ATTR x
                for j in range(owner - 1, 1, -1):
                    if ins[j].opname == "LOAD_ATTR" and ins[j].argval == i.argval and ins[j - 1].opname == "COPY":
                        owner = j - 2
                        break
            if _loads_class(ins, owner, class_names, is_classmethod):
                return f"assigns the class attribute {i.argval!r}"
        if op == "LOAD_GLOBAL" and isinstance(module_globals.get(i.argval), _MUTABLE):
            after = ins[k + 1:k + 4]
            if any(a.opname in ("STORE_SUBSCR", "DELETE_SUBSCR") for a in after) or \
                    (after and after[0].opname in ("LOAD_ATTR", "LOAD_METHOD") and after[0].argval in _MUTATORS):
                return f"mutates the module-level {type(module_globals[i.argval]).__name__} {i.argval!r}"
    if any(i.opname == "LOAD_GLOBAL" and i.argval == "setattr" for i in ins) and \
            any(_loads_class(ins, k, class_names, is_classmethod) for k in range(len(ins))):
        return "may set an attribute of its class (setattr)"
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
        self._task_refusals = {}         # (code id, options) -> why its calls stay on pool workers, or None
        self.tasks_hosted = collections.Counter()    # function name -> replay runs that hosted its calls
        self.tasks_apart = collections.Counter()     # (function name, reason) -> runs that kept them apart

    def live_hosts(self, started=True):
        """The hosts that have not died (``started``: and have said they are ready)."""
        return [h for h in self._hosts if not h.dead and (h.ready or not started)]

    def note_tasks_hosted(self, names):
        """A replay run hosts the calls of the functions ``names`` (counted for explain)."""
        self.tasks_hosted.update(names)

    def note_task_apart(self, name, why):
        self.tasks_apart[(name, why)] += 1

    def task_refusal(self, remote_function, code_id, options):
        """Why a replayed task call site may not run in a host (a GPU, an env of its own, a function that
        writes what the host's actors share), or None."""
        key = (code_id, repr(sorted((options or {}).items())))
        if key not in self._task_refusals:
            options = options or {}
            why = None
            if options.get("num_gpus") or (options.get("resources") or {}).get("GPU"):
                why = "a GPU task"
            elif options.get("runtime_env"):
                why = "a task with a runtime_env of its own"
            else:
                why = function_refusal(remote_function._function)
            self._task_refusals[key] = why
        return self._task_refusals[key]

    def host_for(self, actor, env):
        """The host process for ``actor``'s worker (started if needed), or None if it gets its own.
        ``env``: what the actor's process would add to the session's environment (only no GPUs, on a
        node with GPUs, is shared: hosts then see none either)."""
        reason = self.refusal(actor, env)
        if reason is not None:
            self.refused[(actor.class_name, reason)] += 1
            return None
        live = [h for h in self._hosts if not h.dead]
        if len(live) < self.hosts_wanted:
            host = self._procs.spawn("host", "Host", env)
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
        if env and env != {"CUDA_VISIBLE_DEVICES": ""}:
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
        if not self.placed and not self.refused and not self.tasks_hosted and not self.tasks_apart:
            return []
        pids = {h.index: h.pid for h in self._hosts}
        lines = [f"co-location: {sum(self.placed.values())} actor(s) on {len(self._hosts)} host process(es)"]
        for (name, index), n in sorted(self.placed.items()):
            lines.append(f"    {n} x {name} on host pid {pids.get(index)}")
        for (name, reason), n in sorted(self.refused.items()):
            lines.append(f"    {n} x {name} in a process of its own: {reason}")
        for name, n in sorted(self.tasks_hosted.items()):
            lines.append(f"    task {name}: replayed in a host, beside the actors it exchanges values with "
                         f"({n} run(s))")
        for (name, reason), n in sorted(self.tasks_apart.items()):
            lines.append(f"    task {name}: replayed on a pool worker: {reason} ({n} run(s))")
        return lines
