"""Turn per-backend run results into the comparison: table, JSON, and bar charts.

Every figure is expressed as a speedup over Ray measured in the same
invocation (> 1 means faster than Ray), because the machines this runs on are
shared and noisy and an absolute time alone means little.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict

from benchmarks.backends import ALL, RAY, RAYREACT, RAYREACT_COLOCATED, RAYREACT_NO_REACTOR, SERIAL, SPREAD

COLUMNS = [RAY, RAYREACT, RAYREACT_NO_REACTOR, RAYREACT_COLOCATED]


def speedup(metric_higher_is_better, ray_value, value):
    if ray_value is None or value is None or ray_value <= 0 or value <= 0:
        return None
    return value / ray_value if metric_higher_is_better else ray_value / value


def compare_workload(workload, runs, serial=None, cores=1, reactor_available=True, spread=None):
    """runs: {backend name: RunResult}; serial, spread: the runs without Ray (one process; a process per
    core), if any. Returns the workload's entry of results.json."""
    if not reactor_available and RAYREACT.name in runs and RAYREACT_NO_REACTOR.name not in runs:
        runs = dict(runs)
        runs[RAYREACT_NO_REACTOR.name] = runs[RAYREACT.name]  # the same code path: no reactor to switch off
    metrics_by_backend = {}
    for name, run in runs.items():
        if run.ok:
            try:
                metrics_by_backend[name] = workload.metrics(run.report)
            except (KeyError, TypeError, ValueError) as e:
                run.ok, run.error = False, f"unreadable report: {e!r}"
    serial_metrics = workload.metrics(serial.report) if serial is not None and serial.ok else None
    spread_metrics = workload.metrics(spread.report) if spread is not None and spread.ok else None

    template = next(iter(metrics_by_backend.values()), [])
    rows = []
    for index, proto in enumerate(template):
        values = {name: ms[index].value for name, ms in metrics_by_backend.items() if index < len(ms)}
        ray_value = values.get(RAY.name)
        speedups = {name: speedup(proto.higher_is_better, ray_value, v) for name, v in values.items()}
        row = {"name": proto.name, "unit": proto.unit, "higher_is_better": proto.higher_is_better,
               "values": values, "speedup": speedups, "target_speedup": proto.target_speedup,
               "target_note": proto.target_note, "met": None}
        if serial_metrics and index < len(serial_metrics):
            row["serial_value"] = serial_metrics[index].value
            if proto.higher_is_better:
                ideal = serial_metrics[index].value * cores
                row["fraction_of_serial_x_cores"] = {n: v / ideal for n, v in values.items()}
            else:
                # No runtime can beat the serial time spread perfectly over the cores.
                row["floor"] = serial_metrics[index].value / cores
        if spread_metrics and index < len(spread_metrics) and proto.higher_is_better:
            row["spread_value"] = spread_metrics[index].value
            row["fraction_of_spread"] = {n: v / spread_metrics[index].value for n, v in values.items()}
        if proto.target_speedup is not None and speedups.get(RAYREACT.name) is not None:
            met = speedups[RAYREACT.name] >= proto.target_speedup
            if proto.max_value is not None:
                met = met and values[RAYREACT.name] < proto.max_value
            if proto.min_serial_fraction is not None:
                fraction = row.get("fraction_of_serial_x_cores", {}).get(RAYREACT.name)
                met = met and fraction is not None and fraction >= proto.min_serial_fraction
            row["met"] = met
        rows.append(row)

    checksums = {name: run.report.get("checksum") for name, run in runs.items() if run.ok}
    if spread is not None and spread.ok:
        checksums["spread"] = spread.report.get("checksum")     # (the same envs, seeded alike: the same results)
    deterministic = any(run.report.get("deterministic") for run in runs.values() if run.ok)
    distinct = {c for c in checksums.values() if c is not None}
    return {
        "name": workload.name,
        "description": workload.description,
        "targets": workload.targets,
        "runs": {name: {"ok": run.ok, "wall_s": run.wall_s, "error": run.error, "log": run.log_path,
                        "report": run.report, "reactor": run.reactor} for name, run in runs.items()},
        "serial": None if serial is None else {"ok": serial.ok, "wall_s": serial.wall_s, "error": serial.error,
                                                "report": serial.report},
        "spread": None if spread is None else {"ok": spread.ok, "wall_s": spread.wall_s, "error": spread.error,
                                                "report": spread.report},
        "metrics": rows,
        "checksums": checksums,
        "deterministic": deterministic,
        "checksums_equal": (len(distinct) == 1) if deterministic and len(checksums) > 1 else None,
    }


def _fmt_value(value, unit):
    if value is None:
        return "—"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}"


def _fmt_speedup(x):
    return "—" if x is None else f"{x:.2f}×"


def _fmt_met(row):
    if row["target_speedup"] is None:
        return ""
    target = f"≥ {row['target_speedup']:g}×" + (f" {row['target_note']}" if row["target_note"] else "")
    mark = {True: "✅", False: "❌", None: "?"}[row["met"]]
    return f"{target} {mark}"


def reactor_summary(reactor):
    """One cell: did the reactor replay this run, and for how long?"""
    if not reactor:
        return "?"
    if "error" in reactor:
        return "explain() failed"
    if not reactor.get("enabled"):
        return "off"
    text = f"{reactor['periods_replayed']} periods replayed"
    if "replayed_fraction" in reactor:
        text += f" ({100 * reactor['replayed_fraction']:.0f}% of calls)"
    if reactor["periods_replayed"] == 0:
        reasons = list(reactor.get("refusals", {})) + reactor.get("fallbacks", [])
        text = "no replay" + (f" ({reasons[0][:60]})" if reasons else "")
    elif reactor.get("fallbacks"):
        text += f", {len(reactor['fallbacks'])} fallback(s)"
    return text


def markdown_table(results):
    on, off, colocated = RAYREACT.name, RAYREACT_NO_REACTOR.name, RAYREACT_COLOCATED.name
    head = ["workload", "metric", "Ray", "rayreact", "rayreact (reactor off)", "rayreact (co-located)",
            "speedup vs Ray", "speedup, reactor off", "speedup, co-located", "target (rayreact vs Ray)",
            "same result", "reactor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in results["workloads"]:
        same = {True: "✅ equal", False: "❌ differ", None: "n/a"}[w["checksums_equal"]]
        if not w["metrics"]:
            errors = "; ".join(f"{n}: {r['error']}" for n, r in w["runs"].items() if not r["ok"])
            lines.append(f"| {w['name']} | (no result) | | | | | | | | | {errors} | |")
            continue
        for i, row in enumerate(w["metrics"]):
            cells = [w["name"] if i == 0 else "", row["name"],
                     _fmt_value(row["values"].get(RAY.name), row["unit"]),
                     _fmt_value(row["values"].get(on), row["unit"]),
                     _fmt_value(row["values"].get(off), row["unit"]),
                     _fmt_value(row["values"].get(colocated), row["unit"]),
                     _fmt_speedup(row["speedup"].get(on)), _fmt_speedup(row["speedup"].get(off)),
                     _fmt_speedup(row["speedup"].get(colocated)),
                     _fmt_met(row), same if i == 0 else "",
                     reactor_summary(w["runs"].get(on, {}).get("reactor")) if i == 0 else ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(results):
    out = []
    if not results["reactor_available"]:
        out.append("The reactor (rayreact.core.replay) is not built yet, so rayreact runs its dynamic runtime in "
                   "both columns: the 'reactor off' column repeats the 'rayreact' run, and the two are equal by "
                   "construction.")
    for w in results["workloads"]:
        for name, run in w["runs"].items():
            if not run["ok"]:
                out.append(f"{w['name']} under {ALL[name].label if name in ALL else name} failed: {run['error']}")
        for baseline in (SERIAL, SPREAD):
            run = w.get(baseline.name)
            if run is not None and not run["ok"]:
                out.append(f"{w['name']} with {baseline.label} failed: {run['error']}")
        reactor = w["runs"].get(RAYREACT.name, {}).get("reactor") or {}
        for reason in reactor.get("fallbacks", [])[:3]:
            out.append(f"{w['name']}: the reactor fell back to dynamic mode: {reason}")
        for reason in list(reactor.get("refusals", {}))[:3]:
            out.append(f"{w['name']}: the reactor declined a pattern: {reason}")
        if w["checksums_equal"] is False:
            out.append(f"{w['name']}: the backends computed different results: {w['checksums']}")
        for row in w["metrics"]:
            floor, ray_value = row.get("floor"), row["values"].get(RAY.name)
            if floor is not None and ray_value:
                out.append(f"{w['name']} {row['name']}: the same computation in one process without Ray takes "
                           f"{row['serial_value']:.3g} {row['unit']}; spread perfectly over "
                           f"{results['machine']['usable_cores']} cores that is {floor:.3g} {row['unit']}, "
                           f"{floor / ray_value:.2f}x Ray's time: no runtime can go below it")
            cores = results["machine"]["usable_cores"]
            for key, value_key, baseline, of_it in (
                    ("fraction_of_serial_x_cores", "serial_value", "single-process rate without Ray",
                     f"fraction of that x {cores} cores"),
                    ("fraction_of_spread", "spread_value", "the same envs in a plain process per core without Ray "
                     "(the floor of the round spread over the cores)", "fraction of it")):
                fractions = row.get(key)
                if fractions:
                    parts = ", ".join(f"{ALL[n].label} {f:.0%}" for n, f in fractions.items() if n in ALL)
                    out.append(f"{w['name']} {row['name']}: {baseline} {row[value_key]:.0f} {row['unit']}; "
                               f"{of_it}: {parts}")
    return out


def write_markdown(results, path, plot_files):
    m = results["machine"]
    lines = ["# rayreact vs Ray: benchmark results", ""]
    lines.append(f"Mode: {'quick (smoke-test sizes; the figures mean little)' if results['quick'] else 'full'}. "
                 f"Run {results['started']}, {results['elapsed_s']:.0f} s in all.")
    lines.append("")
    load = m.get("load_average_at_start") or []
    load_text = " / ".join(f"{x:.1f}" for x in load) or "unknown"
    lines.append(f"Machine: {m['cpu_model']}, {m['usable_cores']} usable cores ({m['logical_cores']} logical), "
                 f"{m['memory_gib']} GiB RAM, {m['os']}; load average at start {load_text} (1 / 5 / 15 min).")
    p = m["packages"]
    lines.append(f"Software: Python {m['python']}, Ray {p.get('ray')}, torch {p.get('torch')}, numpy {p.get('numpy')}, "
                 f"gymnasium {p.get('gymnasium')}, ale-py {p.get('ale-py')}, cloudpickle {p.get('cloudpickle')}; "
                 f"rayreact at {m['rayreact_commit']}.")
    if load and load[0] > m["usable_cores"]:
        lines.append("")
        lines.append(f"**The machine was busy with other work when this ran (load {load[0]:.1f} on "
                     f"{m['usable_cores']} cores): every figure is noisy, and the ratios, measured in the same run, "
                     f"are the ones to read.**")
    lines.append("")
    lines.append("Each workload is an ordinary Ray script run in a fresh process per backend: real Ray, rayreact "
                 "(`rayreact run`, reactor on), rayreact with `RAYREACT_REACTOR=0`, and rayreact with actors "
                 "sharing host processes (`RAYREACT_COLOCATE=1`, reactor on). Speedup > 1 means faster "
                 "than Ray. 'Same result' compares the scripts' checksums where the workload is deterministic.")
    lines.append("")
    lines.append(markdown_table(results))
    extra = notes(results)
    if extra:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in extra]
    if plot_files:
        lines += ["", "## Charts", ""]
        for name in plot_files:
            lines.append(f"![{name}]({name})")
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=2, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
