"""Compare traces of one script: real Ray (one or more runs) against a candidate.

Pure functions over event lists (see :mod:`rayreact.core.trace` for the format)
and captured stdout; no processes.

A trace is cut into *units*: each actor (its key) with its calls in execution
order, and each task function with its calls as a multiset.  What the candidate
must reproduce about a unit is what Ray itself reproduces: of the projections
below, strongest first, the comparison uses the first one on which all Ray runs
agree, and the candidate must match the first Ray run on it.

    exact            ordered (method, args, outcome)       actors only
    calls in order   ordered (method, args)                actors only
    multiset         multiset of (method, args, outcome)
    calls multiset   multiset of (method, args)
    methods          multiset of method names
    method set       which methods ran at all

Calls of threaded and async actors (``concurrent``) and of tasks start at
*multiset*.  A unit on which no two Ray runs agree, or that only some Ray runs
have, is reported as nondeterministic under Ray and not compared.  When the Ray
runs show a ``wait`` that returned with refs still pending, call order may
follow timing from then on: an actor's calls that started before that moment
keep their order, later ones are compared as a multiset ("exact until wait()"),
and a candidate that differs from Ray only in what a weaker projection forgets
is reported as a nondeterminism warning, not a divergence (for such scripts a
stdout difference is a warning too once Ray's own runs have been seen to vary).

Calls that start in an actor after the driver killed it are dropped: Ray's kill
is asynchronous, so whether they run at all is timing.

Stdout is compared line by line after dropping lines forwarded from workers
(``(f pid=123) ...``): lines identical in all Ray runs must be identical in the
candidate; when Ray runs print different numbers of lines, stdout is not
compared.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

PROJECTIONS = ["exact", "calls in order", "multiset", "calls multiset", "methods", "method set"]
ORDERED = {"exact", "calls in order"}
# After a wait() that returned with refs pending, an actor's calls keep their
# order up to that moment and are a multiset from there on.
UNTIL_WAIT = {"exact": "exact until wait()", "calls in order": "calls in order until wait()"}


@dataclass(frozen=True)
class Call:
    method: str
    args: str
    outcome: str  # result digest, or "!<ExceptionClass>"
    seq: object = None
    args_preview: str = ""
    result_preview: str = ""
    t: int = 0

    def describe(self, target):
        where = f"{target}.{self.method}" if self.method else target
        seq = f" #{self.seq}" if self.seq is not None else ""
        outcome = (f"raised {self.outcome[1:]}" if self.outcome.startswith("!")
                   else f"-> {self.result_preview} [{self.outcome}]")
        return f"{where}{seq}({self.args_preview}) [{self.args}] {outcome}"


@dataclass
class Unit:
    name: str  # "actor Counter#0" or "task f"
    target: str
    ordered: bool
    concurrent: bool = False
    calls: list = field(default_factory=list)


@dataclass
class TraceSummary:
    units: dict  # name -> Unit
    partial_waits: int = 0
    events: int = 0
    first_wait_t: int | None = None  # start time of the first wait() that left refs pending

    def calls_before_wait(self, name):
        """How many of a unit's calls started before the first partial wait() (all when none)."""
        calls = self.units[name].calls
        if self.first_wait_t is None:
            return len(calls)
        return sum(1 for c in calls if c.t < self.first_wait_t)


def _call_of(event):
    outcome = "!" + event["error"] if "error" in event else event.get("result", "")
    return Call(event.get("method") or "", event.get("args", ""), outcome, event.get("seq"),
                event.get("args_preview", ""), event.get("result_preview", ""), event.get("t", 0))


def summarize(events) -> TraceSummary:
    """Cut a trace into units (actors in execution order, task functions)."""
    units = {}
    partial_waits = 0
    first_wait_t = None
    actor_events = {}
    killed_at = {}
    for e in events:
        kind = e.get("kind")
        if kind == "kill":
            killed_at[e["target"]] = min(killed_at.get(e["target"], e["t"]), e["t"])
        elif kind == "wait":
            if e.get("partial"):
                partial_waits += 1
                t = e.get("t", 0)
                first_wait_t = t if first_wait_t is None else min(first_wait_t, t)
        elif kind == "task":
            name = f"task {e['target']}"
            unit = units.setdefault(name, Unit(name, e["target"], ordered=False))
            unit.calls.append(_call_of(e))
        elif kind in ("actor_create", "actor_call"):
            actor_events.setdefault(e["target"], []).append(e)
    for key, evs in actor_events.items():
        name = f"actor {key}"
        unit = Unit(name, key, ordered=True)
        unit.concurrent = any(e.get("concurrent") for e in evs if e["kind"] == "actor_create")
        unit.calls = [_call_of(e) for e in _execution_order(evs)]
        if key in killed_at:  # Ray may still run calls sent after an (asynchronous) kill
            unit.calls = [c for c in unit.calls if c.t < killed_at[key]]
        units[name] = unit
    return TraceSummary(units, partial_waits, len(events), first_wait_t)


def _execution_order(events):
    """One actor's events: incarnations (restarts) in creation order, calls by seq within each.

    A call belongs to the latest actor_create of the same process that started
    before it; calls with no such creation (their creation failed to be traced)
    form an incarnation of their own per process.
    """
    creates = sorted((e for e in events if e["kind"] == "actor_create"), key=lambda e: e.get("t", 0))
    incarnation_of = {}
    for e in events:
        if e["kind"] == "actor_create":
            incarnation_of[id(e)] = (creates.index(e), e.get("t", 0))
            continue
        owner = None
        for i, c in enumerate(creates):
            if c.get("pid") == e.get("pid") and c.get("t", 0) <= e.get("t", 0):
                owner = (i, c.get("t", 0))
        incarnation_of[id(e)] = owner if owner is not None else (len(creates), e.get("pid", 0))
    return sorted(events, key=lambda e: (incarnation_of[id(e)], e.get("seq") or 0))


def project(unit: Unit, projection: str, ordered_prefix=None):
    """``unit`` seen through ``projection``; an "... until wait()" projection keeps the
    order of the first ``ordered_prefix`` calls only."""
    calls = unit.calls
    for base, name in UNTIL_WAIT.items():
        if projection == name:
            head = Unit(unit.name, unit.target, True, unit.concurrent, calls[:ordered_prefix])
            tail = Unit(unit.name, unit.target, True, unit.concurrent, calls[ordered_prefix:])
            return project(head, base), project(tail, "multiset" if base == "exact" else "calls multiset")
    if projection == "exact":
        return tuple((c.method, c.args, c.outcome) for c in calls)
    if projection == "calls in order":
        return tuple((c.method, c.args) for c in calls)
    if projection == "multiset":
        return Counter((c.method, c.args, c.outcome) for c in calls)
    if projection == "calls multiset":
        return Counter((c.method, c.args) for c in calls)
    if projection == "methods":
        return Counter(c.method for c in calls)
    if projection == "method set":
        return frozenset(c.method for c in calls)
    raise ValueError(projection)


def allowed_projections(unit: Unit, waits_seen: bool):
    if not unit.ordered or unit.concurrent:
        return [p for p in PROJECTIONS if p not in ORDERED]
    if waits_seen:
        return [UNTIL_WAIT.get(p, p) for p in PROJECTIONS]
    return PROJECTIONS


# ---------------------------------------------------------------- verdicts

@dataclass
class UnitVerdict:
    unit: str
    status: str  # "equal" | "diverged" | "nondeterministic" | "missing" | "extra" | "warning"
    projection: str | None = None
    detail: list = field(default_factory=list)  # human-readable lines
    ray_varied: bool = False  # the Ray runs disagreed on a stronger projection of this unit


@dataclass
class Comparison:
    verdicts: list
    stdout_status: str  # "equal" | "diverged" | "not compared"
    stdout_detail: list
    exit_detail: list
    waits_seen: bool

    @property
    def diverged(self):
        return (any(v.status in ("diverged", "missing", "extra") for v in self.verdicts)
                or self.stdout_status == "diverged" or bool(self.exit_detail))

    def counts(self):
        return Counter(v.status for v in self.verdicts)

    def first_divergence(self):
        for v in self.verdicts:
            if v.status in ("diverged", "missing", "extra"):
                return v
        return None


def compare_units(ray_runs, candidate: TraceSummary):
    """Verdict per unit: ``ray_runs`` are summaries of the reference runs."""
    waits_seen = any(r.partial_waits for r in ray_runs)
    names = sorted(set().union(*(r.units for r in ray_runs), candidate.units), key=_unit_sort_key)
    verdicts = []
    for name in names:
        present = [name in r.units for r in ray_runs]
        if not any(present):
            unit = candidate.units[name]
            verdicts.append(UnitVerdict(name, "extra", detail=[
                f"rayreact ran {len(unit.calls)} call(s) that Ray never ran, first:",
                "  rayreact: " + unit.calls[0].describe(unit.target)]))
            continue
        if not all(present):
            verdicts.append(UnitVerdict(name, "nondeterministic", detail=[
                f"present in {sum(present)} of {len(ray_runs)} Ray runs"]))
            continue
        refs = [r.units[name] for r in ray_runs]
        if name not in candidate.units:
            verdicts.append(UnitVerdict(name, "missing", detail=[
                f"Ray ran {len(refs[0].calls)} call(s) that rayreact never ran, first:",
                "  ray:      " + refs[0].calls[0].describe(refs[0].target)]))
            continue
        prefix = min(r.calls_before_wait(name) for r in ray_runs)
        verdicts.append(_compare_unit(name, refs, candidate.units[name], waits_seen, prefix))
    return verdicts, waits_seen


def _unit_sort_key(name):
    # Actors first, then tasks; actor creation order (index) before name order.
    kind, _, rest = name.partition(" ")
    return (kind != "actor", rest)


def _compare_unit(name, refs, cand, waits_seen, prefix):
    projections = allowed_projections(refs[0], waits_seen)

    def same(a, b, p):
        return project(a, p, prefix) == project(b, p, prefix)

    level = next((p for p in projections if all(same(r, refs[0], p) for r in refs[1:])), None)
    if level is None:
        return UnitVerdict(name, "nondeterministic", detail=["Ray runs disagree even on which methods ran"],
                           ray_varied=True)
    varied = level != projections[0]
    if same(cand, refs[0], level):
        return UnitVerdict(name, "equal", level, ray_varied=varied)
    detail = _explain(refs[0], cand, level, prefix)
    if waits_seen:
        if level in UNTIL_WAIT.values():
            if project(cand, level, prefix)[0] != project(refs[0], level, prefix)[0]:
                return UnitVerdict(name, "diverged", level, detail)  # before the wait, order is fixed
            tail = _cut(refs[0], prefix, None)
            cand_tail = _cut(cand, prefix, None)
            weaker = ["calls multiset", "methods", "method set"]
            held = next((p for p in weaker if project(cand_tail, p) == project(tail, p)), None)
            if held is None and project(cand_tail, "method set") < project(tail, "method set"):
                # Whether an actor gets another call at all once wait() leaves refs pending is timing too
                # (an Ape-X loop pauses whichever explorer is ahead): fewer methods, none Ray never ran.
                held = "methods Ray ran"
        else:
            weaker = projections[projections.index(level) + 1:]
            held = next((p for p in weaker if same(cand, refs[0], p)), None)
        if held is not None:
            return UnitVerdict(name, "warning", level, [
                f"differs from Ray on '{level}' but agrees on '{held}'; the script uses wait() with "
                "refs pending, so call order may follow timing (Ray does not fix it)"] + detail, ray_varied=varied)
    return UnitVerdict(name, "diverged", level, detail, ray_varied=varied)


def _explain(ref: Unit, cand: Unit, level, prefix=None):
    """Lines that show the first difference, with both sides' events."""
    for base, name in UNTIL_WAIT.items():
        if level == name:
            head = _explain(_cut(ref, None, prefix), _cut(cand, None, prefix), base) \
                if project(ref, name, prefix)[0] != project(cand, name, prefix)[0] else None
            if head is not None:
                return [f"(in the first {prefix} calls, made before wait() left refs pending)"] + head
            tail_level = "multiset" if base == "exact" else "calls multiset"
            return ([f"(after the first {prefix} calls, compared as a multiset)"]
                    + _explain(_cut(ref, prefix, None), _cut(cand, prefix, None), tail_level))
    if level in ORDERED:
        key = (lambda c: (c.method, c.args, c.outcome)) if level == "exact" else (lambda c: (c.method, c.args))
        for i, (a, b) in enumerate(zip(ref.calls, cand.calls)):
            if key(a) != key(b):
                return [f"first difference at call {i} of {ref.target}:",
                        "  ray:      " + a.describe(ref.target),
                        "  rayreact: " + b.describe(cand.target)]
        i = min(len(ref.calls), len(cand.calls))
        lines = [f"Ray ran {len(ref.calls)} call(s), rayreact {len(cand.calls)}; first unmatched, call {i}:"]
        if i < len(ref.calls):
            lines.append("  ray:      " + ref.calls[i].describe(ref.target))
        if i < len(cand.calls):
            lines.append("  rayreact: " + cand.calls[i].describe(cand.target))
        return lines
    if level == "method set":
        ref_set, cand_set = {c.method for c in ref.calls}, {c.method for c in cand.calls}
        return [f"methods only Ray ran: {sorted(ref_set - cand_set)}; only rayreact: {sorted(cand_set - ref_set)}"]
    key = {"multiset": lambda c: (c.method, c.args, c.outcome),
           "calls multiset": lambda c: (c.method, c.args),
           "methods": lambda c: c.method}[level]
    ref_count, cand_count = Counter(map(key, ref.calls)), Counter(map(key, cand.calls))
    only_ray = ref_count - cand_count
    only_cand = cand_count - ref_count
    lines = [f"calls differ as a multiset ({level}): {sum(only_ray.values())} only under Ray, "
             f"{sum(only_cand.values())} only under rayreact"]
    for label, side, only in (("ray:     ", ref, only_ray), ("rayreact:", cand, only_cand)):
        shown = 0
        for c in side.calls:
            if only.get(key(c)) and shown < 3:
                lines.append(f"  {label} " + c.describe(side.target))
                only[key(c)] -= 1
                shown += 1
    return lines


def _cut(unit, start, stop):
    return Unit(unit.name, unit.target, unit.ordered, unit.concurrent, unit.calls[start:stop])


# ---------------------------------------------------------------- stdout and exit status

# Lines Ray forwards from other processes: "(f pid=123) ...", "(raylet) ...", maybe colored.
_FORWARDED = re.compile(r"^(?:\x1b\[[0-9;]*m)?\((?:[^()]*\bpid=\d+[^()]*|[A-Za-z_][\w.-]*(?:,? ip=[^()]*)?)\)")


# Measurements differ between any two runs: a number followed by a unit of time ("2.73 s", "40 ms",
# "0.01 seconds", "3 min"), of memory ("512 MB", "1.5 GiB"), a rate ("752.5 observations/s", "11042 env
# steps/sec", "90 calls per second") or a speed-up ("3.2x faster") is masked before comparing stdout.
_TIME = r"(?:s|secs?|seconds?|ms|msecs?|milliseconds?|us|µs|usecs?|microseconds?|ns|nanoseconds?|mins?|minutes?|h|hrs?|hours?)"
_MEMORY = r"(?:[KMGT]i?B|[kmgt]b)"
_RATE = r"[A-Za-z ]*(?:/\s*(?:s|sec|second)|\s+per\s+(?:s|sec|second))"
_MEASUREMENT = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?=\s*" + _TIME + r"\b|\s*" + _MEMORY + r"\b|" + _RATE
                          + r"\b)|\d+\.\d+(?=x\b)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def stdout_lines(text):
    """The driver's own stdout lines (lines forwarded from worker processes dropped), measurements masked."""
    return [_MEASUREMENT.sub("<measured>", line.rstrip()) for line in text.splitlines()
            if not _FORWARDED.match(line)]


def _shape(line):
    return _NUMBER.sub("<n>", line)


def _groups(lines):
    """Consecutive lines of one shape (the same but for their numbers), as (shape, lines) pairs."""
    out = []
    for line in lines:
        shape = _shape(line)
        if out and out[-1][0] == shape:
            out[-1][1].append(line)
        else:
            out.append((shape, [line]))
    return out


def fold_speed_dependent(outputs):
    """Where the outputs print the same sequence of line shapes but a run of same-shape lines ("Progress:
    40%", "Progress: 80%") holds a different number of lines in each, that count follows the speed of the
    run, not the script's semantics: fold each such run into one marker line.  (The outputs, folded; a
    note per folded run.)  Runs of equal length are left as they are and compared line by line."""
    grouped = [_groups(lines) for lines in outputs]
    if any([s for s, _ in g] != [s for s, _ in grouped[0]] for g in grouped[1:]):
        return outputs, []
    folded = [[] for _ in outputs]
    notes = []
    for i, (shape, _) in enumerate(grouped[0]):
        sizes = [len(g[i][1]) for g in grouped]
        if len(set(sizes)) > 1:
            for out in folded:
                out.append(f"<speed-dependent: {shape}>")
            notes.append(f"{shape!r} printed {', '.join(map(str, sizes[:-1]))} time(s) under Ray and {sizes[-1]} "
                         "under rayreact: a count that follows speed, not compared line by line")
        else:
            for out, g in zip(folded, grouped):
                out.extend(g[i][1])
    return folded, notes


def compare_stdout(ray_outputs, candidate_output):
    outputs, speed_notes = fold_speed_dependent([stdout_lines(t) for t in (*ray_outputs, candidate_output)])
    status, detail = _compare_stdout_lines(outputs[:-1], outputs[-1])
    return status, detail + speed_notes


def _compare_stdout_lines(runs, cand):
    if any(len(r) != len(runs[0]) for r in runs[1:]):
        return "not compared", [f"Ray runs printed {[len(r) for r in runs]} lines: stdout is nondeterministic"]
    stable = [i for i in range(len(runs[0])) if all(r[i] == runs[0][i] for r in runs[1:])]
    if len(cand) != len(runs[0]):
        return "diverged", [f"Ray printed {len(runs[0])} lines, rayreact {len(cand)}",
                            *_first_line_difference(runs[0], cand, range(max(len(cand), len(runs[0]))))]
    lines = _first_line_difference(runs[0], cand, stable)
    if lines:
        return "diverged", lines
    unstable = len(runs[0]) - len(stable)
    return "equal", ([f"{unstable} line(s) differ between Ray runs and were not compared"] if unstable else [])


def _first_line_difference(ref, cand, indices):
    for i in indices:
        a = ref[i] if i < len(ref) else "<no line>"
        b = cand[i] if i < len(cand) else "<no line>"
        if a != b:
            return [f"first differing stdout line, {i + 1}:", f"  ray:      {a}", f"  rayreact: {b}"]
    return []


def compare_runs(ray_runs, candidate, ray_stdouts=None, candidate_stdout=None,
                 ray_exit_codes=None, candidate_exit_code=None) -> Comparison:
    """Full comparison of a candidate run against the Ray runs."""
    verdicts, waits_seen = compare_units(ray_runs, candidate)
    if ray_stdouts is not None and candidate_stdout is not None:
        stdout_status, stdout_detail = compare_stdout(ray_stdouts, candidate_stdout)
    else:
        stdout_status, stdout_detail = "not compared", []
    varied = [v.unit for v in verdicts if v.ray_varied]
    if stdout_status == "diverged" and varied:
        # Ray itself ran these calls in a different order from run to run: printed results may follow
        # that order, so a stdout difference proves nothing.  Name the units, and wait() only if it was used.
        cause = "wait() with refs pending lets call order follow timing, and " if waits_seen else ""
        stdout_detail = [f"differs, but {cause}Ray's own runs ordered the calls of "
                         f"{', '.join(varied[:5])}{' ...' if len(varied) > 5 else ''} differently from each other"
                         ] + stdout_detail
        stdout_status = "warning"
    exit_detail = []
    if (ray_exit_codes and candidate_exit_code is not None and len(set(ray_exit_codes)) == 1
            and candidate_exit_code != ray_exit_codes[0]):
        exit_detail = [f"exit status: ray {ray_exit_codes[0]}, rayreact {candidate_exit_code}"]
    return Comparison(verdicts, stdout_status, stdout_detail, exit_detail, waits_seen)
