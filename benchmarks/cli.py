"""``python -m benchmarks [--quick] [--only NAME ...] [--out DIR]``: run, compare, write results.

For each selected workload, for each backend, one fresh process; progress goes
to stderr, the comparison table to stdout, and results.md / results.json /
PNG charts to ``--out`` (run logs and raw reports under ``--out``/tmp/).
Exit status 1 if any run failed (the files are written regardless).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

from benchmarks import backends, machine, plots, report, runner
from benchmarks.workloads import BY_NAME, WORKLOADS

DEFAULT_OUT = os.path.join(backends.REPO_ROOT, "benchmarks", "results")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that everything runs")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help=f"run only this workload (repeatable; comma lists too): {', '.join(BY_NAME)}")
    parser.add_argument("--out", default=DEFAULT_OUT, help="where results.md/json and the charts go")
    parser.add_argument("--backends", default=",".join(backends.ALL),
                        help="comma list of backends to run (default: all)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run (default 300 quick, 900 full)")
    parser.add_argument("--verbose", "-v", action="store_true", help="echo every script's output")
    args = parser.parse_args(argv)
    names = [n for item in (args.only or []) for n in item.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(BY_NAME)}")
    args.workloads = [BY_NAME[n] for n in names] if names else WORKLOADS
    args.backend_list = [backends.ALL[n] for n in args.backends.split(",") if n]
    if args.timeout is None:
        args.timeout = 300 if args.quick else 900
    return args


def progress(message):
    print(message, file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out_dir = os.path.abspath(args.out)
    work_dir = os.path.join(out_dir, "tmp")
    os.makedirs(work_dir, exist_ok=True)
    reactor = backends.reactor_available()
    selected = [b for b in args.backend_list if reactor or b is not backends.RAYREACT_NO_REACTOR]
    if not reactor and backends.RAYREACT_NO_REACTOR in args.backend_list:
        progress("note: rayreact has no reactor yet (rayreact.core.replay); the 'reactor off' column will repeat "
                 "the rayreact run instead of running it again")
    description = machine.describe()
    progress(f"machine: {machine.one_line(description)}")

    plan = []
    for workload in args.workloads:
        for backend in selected:
            plan.append((workload, backend, workload.args(args.quick)))
        if workload.serial_args is not None:
            serial_args = workload.serial_quick_args if args.quick else workload.serial_args
            plan.append((workload, backends.SERIAL, serial_args))
        if workload.spread_args is not None:
            spread_args = workload.spread_quick_args if args.quick else workload.spread_args
            plan.append((workload, backends.SPREAD, ["--spread", str(description["usable_cores"]), *spread_args]))

    started = time.perf_counter()
    results_by_workload = {w.name: {} for w in args.workloads}
    serial_by_workload = {}
    spread_by_workload = {}
    for number, (workload, backend, script_args) in enumerate(plan, 1):
        progress(f"[{number}/{len(plan)}] {workload.name} · {backend.label} ...")
        if not args.quick:
            runner.wait_for_quiet()          # (a figure, not just a check that it runs: measured on idle cores)
        result = runner.run_script(backend, workload.script, script_args, work_dir, f"{workload.name}-{backend.name}",
                                   args.timeout, verbose=args.verbose, progress=progress)
        status = "ok" if result.ok else f"FAILED ({result.error}); log: {result.log_path}"
        progress(f"[{number}/{len(plan)}] {workload.name} · {backend.label}: {status}, {result.wall_s:.1f} s")
        if backend is backends.SERIAL:
            serial_by_workload[workload.name] = result
        elif backend is backends.SPREAD:
            spread_by_workload[workload.name] = result
        else:
            results_by_workload[workload.name][backend.name] = result

    results = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "elapsed_s": time.perf_counter() - started,
        "quick": args.quick,
        "reactor_available": reactor,
        "machine": description,
        "backends": [{"name": b.name, "label": b.label} for b in args.backend_list],
        "workloads": [report.compare_workload(w, results_by_workload[w.name], serial_by_workload.get(w.name),
                                              description["usable_cores"], reactor, spread_by_workload.get(w.name))
                      for w in args.workloads],
    }
    plot_files = plots.write_plots(results, out_dir)
    report.write_markdown(results, os.path.join(out_dir, "results.md"), plot_files)
    report.write_json(results, os.path.join(out_dir, "results.json"))

    print(report.markdown_table(results))
    for note in report.notes(results):
        print(f"- {note}")
    print(f"\nwrote {os.path.join(out_dir, 'results.md')}, results.json and {len(plot_files)} chart(s)")
    failed = [r for w in results_by_workload.values() for r in w.values() if not r.ok]
    failed += [r for r in (*serial_by_workload.values(), *spread_by_workload.values()) if not r.ok]
    return 1 if failed else 0
