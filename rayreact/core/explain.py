"""Visibility into the reactor layer: ``rayreact.explain()`` and the Chrome trace behind ``rayreact.timeline``.

``explain()`` reports what the reactor inferred and did: its state, the plan
(period, reactors with their static reaction order, connections), how many
periods each replay ran, every fallback with its reason, and the patterns it
declined.  It can write the plan as Graphviz DOT and as PNG (with Graphviz's
``dot`` when installed, else drawn with matplotlib).

``chrome_events`` turns replay runs into Chrome trace events (Perfetto,
chrome://tracing): one slice per reaction per worker, one per driver get/wait,
and flow arrows along connections from the reaction that wrote a token to the
reactions that read it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from . import context


class Explanation:
    """What ``explain()`` returns; ``str()`` is the report."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.state = snapshot.get("state", "OFF")
        self.runs = snapshot.get("runs", [])
        self.fallbacks = snapshot.get("fallbacks", [])
        self.refusals = snapshot.get("refusals", {})
        self.plan = self.runs[-1]["plan"] if self.runs else snapshot.get("pending")
        self.periods_replayed = sum(r["periods"] for r in self.runs)
        self.events = snapshot.get("events", 0)
        # A run replays the driver's API events from its first up to where it ended (the deviating event,
        # served dynamically, is not counted), and the reads it served off the plan.
        self.replayed_events = sum(r["index"] - r["first"] - r.get("skipped_reads", 0) + r.get("off_plan_reads", 0)
                                   for r in self.runs)

    @property
    def replayed_fraction(self):
        """The fraction of the driver's API events (calls, puts, gets, waits) that ran replayed."""
        return self.replayed_events / self.events if self.events else 0.0

    # -- text ---------------------------------------------------------------------
    def __str__(self):
        snap = self.snapshot
        if not snap.get("enabled"):
            return "\n".join([f"rayreact reactor: off ({snap.get('why', 'disabled')})", *snap.get("colocation", ())])
        lines = [f"rayreact reactor: {self.state}; {len(self.runs)} replay run(s), "
                 f"{self.periods_replayed} periods replayed, {len(self.fallbacks)} fallback(s), "
                 f"{self.events} driver API events so far, {self.replayed_events} of them replayed "
                 f"({100 * self.replayed_fraction:.0f}%)"]
        if self.plan is not None:
            lines.append("latest plan: " + _readable(self.plan, self.plan.describe()).replace("\n", "\n  "))
        for r in self.runs:
            state = "replaying" if r["ended"] is None else f"ended: {r['reason']}"
            if r.get("handing_over"):
                state += "; handing its values over"
            workers = ", ".join(f"{_readable(r['plan'], name)} pid {pid}" for name, (pid, cls) in r["workers"].items())
            lines.append(f"run {r['number']}: period {r['plan'].period}, from event {r['first']}, "
                         f"{r['periods']} periods ({state}); {workers}")
        if self.fallbacks:
            lines.append("fallbacks to dynamic mode:")
            lines.extend(f"  at {when:.3f} s after {periods} periods: {reason}"
                         for when, reason, periods in self.fallbacks)
        seen = self.snapshot.get("completion_order")
        if self.refusals or seen:
            lines.append("patterns not replayed:")
            lines.extend(f"  {reason} (x{n})" for reason, n in self.refusals.items())
            if seen and seen not in self.refusals:
                lines.append(f"  {seen} (seen in the recording so far)")
        if self.plan is None and not self.refusals and not seen:
            lines.append("no repeating pattern found yet")
        lines.extend(snap.get("colocation", ()))
        return "\n".join(lines)

    __repr__ = __str__

    # -- graph --------------------------------------------------------------------
    def to_dot(self):
        if self.plan is None:
            return 'digraph plan {\n  label="no plan";\n}'
        return _readable(self.plan, self.plan.to_dot())

    def write_dot(self, path):
        with open(path, "w") as f:
            f.write(self.to_dot() + "\n")
        return path

    def write_png(self, path):
        """PNG of the plan: Graphviz ``dot`` if installed, else a matplotlib drawing."""
        dot = shutil.which("dot")
        if dot is not None:
            result = subprocess.run([dot, "-Tpng", "-o", path], input=self.to_dot(), text=True,
                                    capture_output=True, timeout=60)
            if result.returncode == 0:
                return path
        _draw_with_matplotlib(self.plan, path)
        return path


def _readable(plan, text):
    """Name actors by class and position (``actor:Policy#2``) instead of their 32-digit ids."""
    seen = {}
    for r in plan.reactors:
        if r.kind == "actor" and r.actor:
            cls = (r.class_key or "actor").rsplit(".", 1)[-1]
            seen[cls] = seen.get(cls, 0) + 1
            text = text.replace(f"actor:{r.actor}", f"actor:{cls}#{seen[cls]}")
    return text


def explain(path=None, *, dot=None, png=None, quiet=False, file=None):
    """Print (unless ``quiet``) and return what the reactor inferred and replayed.

    ``path`` ending in ``.png`` writes a PNG, otherwise DOT; ``dot=`` and
    ``png=`` name those files explicitly.
    """
    rt = context.current
    reactor = getattr(rt, "reactor", None)
    if reactor is None and rt is None:
        from . import replay
        last = replay.LAST_SNAPSHOT
    else:
        last = None
    if last is not None:
        snap = dict(last, state=f"{last['state']} (session ended)")
    elif reactor is None:
        why = "rayreact is not initialized" if rt is None else \
            ("init(_reactor=False) or RAYREACT_REACTOR=0" if getattr(rt, "is_driver", False) else
             "not available in this runtime")
        colocation = getattr(rt, "colocation", None)
        snap = {"enabled": False, "why": why, "colocation": colocation.report() if colocation is not None else []}
    else:
        snap = reactor.snapshot()
    out = Explanation(snap)
    if path is not None:
        if str(path).endswith(".png"):
            png = path
        else:
            dot = path
    if dot is not None:
        out.write_dot(dot)
    if png is not None:
        out.write_png(png)
    if not quiet:
        print(out, file=file or sys.stdout)
    return out


def _draw_with_matplotlib(plan, path):
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    width = 8 if plan is None else max(6.0, 1.25 * len(plan.reactors) + 1)
    height = 6 if plan is None else max(4.0, 0.45 * plan.period + 2)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.axis("off")
    if plan is None:
        ax.text(0.5, 0.5, "no plan", ha="center")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return
    names = [r.name for r in plan.reactors]
    column = {name: i for i, name in enumerate(names)}
    spot = {}
    for r in plan.reactors:
        for q in r.schedule:
            if r.kind == "driver" and plan.reactions[q].reactor != "driver":
                continue
            spot[q] = (column[r.name], -q)
    for i, r in enumerate(plan.reactors):
        label = r.name if r.kind != "actor" else f"{(r.class_key or 'actor').rsplit('.', 1)[-1]} #{i}"
        ax.text(i, 1, label, ha="left", va="bottom", fontsize=8, weight="bold", rotation=25)
    for q, (x, y) in spot.items():
        reaction = plan.reactions[q]
        ax.text(x, y, f"{q}: {reaction.target or reaction.op}", ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round", fc="#e8f0fe", ec="#4a6fa5"))
    for c in plan.connections:
        if c.source != "period" or c.producer not in spot:
            continue
        for u in c.uses:
            if u.position not in spot:
                continue
            (x0, y0), (x1, y1) = spot[c.producer], spot[u.position]
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                        arrowprops=dict(arrowstyle="->", color="#b03a2e" if u.lag else "#333333",
                                        linestyle="--" if u.lag else "-", connectionstyle="arc3,rad=0.15"))
    ax.set_xlim(-0.8, len(names) - 0.2)
    ax.set_ylim(-plan.period - 0.5, 2.6)
    ax.set_title(f"rayreact plan: period {plan.period}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------- Chrome trace
def chrome_events(runs):
    """Chrome trace events for replay runs (see module docstring)."""
    events = []
    named = set()
    flow = 0
    for run in runs:
        plan = run["plan"]
        labels = run["labels"]
        P, start = plan.period, plan.start
        slices = {}                        # reactor name -> {index: (pid, t0, t1)}
        for name, (pid, records) in run["timeline"].items():
            cls = run["workers"].get(name, (pid, name))[1]
            if pid not in named:
                named.add(pid)
                events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                               "args": {"name": f"{cls} ({name})"}})
            table = slices[name] = {}
            for index, t0, t1 in records:
                q = (index - start) % P
                table[index] = (pid, t0, t1)
                events.append({"ph": "X", "cat": "reaction", "name": labels[q], "pid": pid, "tid": pid,
                               "ts": t0 * 1e6, "dur": max(0.001, (t1 - t0) * 1e6),
                               "args": {"index": index, "position": q, "run": run["number"]}})
        dpid, drecords = run["driver"]
        if dpid not in named:
            named.add(dpid)
            events.append({"ph": "M", "name": "process_name", "pid": dpid, "tid": dpid,
                           "args": {"name": "driver"}})
        table = slices["driver"] = {}
        for index, t0, t1 in drecords:
            q = (index - start) % P
            table[index] = (dpid, t0, t1)
            events.append({"ph": "X", "cat": "driver", "name": labels[q], "pid": dpid, "tid": dpid,
                           "ts": t0 * 1e6, "dur": max(0.001, (t1 - t0) * 1e6),
                           "args": {"index": index, "position": q, "run": run["number"]}})
        for c in plan.connections:
            if c.source != "period" or c.reactor not in slices:
                continue
            for use in c.uses:
                readers = slices.get(use.reactor)
                if not readers:
                    continue
                d = plan.distance(c, use)
                for index, (wpid, w0, w1) in slices[c.reactor].items():
                    if (index - start) % P != c.producer:
                        continue
                    read = readers.get(index + d)
                    if read is None:
                        continue
                    rpid, r0, r1 = read
                    flow += 1
                    common = {"cat": "connection", "name": f"c{c.id}", "id": flow}
                    events.append({"ph": "s", "pid": wpid, "tid": wpid, "ts": (w0 + w1) / 2 * 1e6, **common})
                    events.append({"ph": "f", "bp": "e", "pid": rpid, "tid": rpid, "ts": (r0 + r1) / 2 * 1e6,
                                   **common})
    return events


def write_timeline(events, path):
    import json
    with open(path, "w") as f:
        json.dump(events, f)
    return path
