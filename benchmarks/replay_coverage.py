"""How much of each example and compat script runs replayed: the figure issue 16 asks for.

Runs every script in examples/ and compat_tests/ (not the divergent ones, which exist to differ from Ray)
with ``rayreact run --explain`` at its default size, one fresh process each, and prints per script the
driver's API events, the share that ran replayed, and the patterns the reactor declined with their counts.

    python benchmarks/replay_coverage.py                   # every script, default sizes (minutes)
    python benchmarks/replay_coverage.py --quick           # examples with --quick (warm-up dominates there)
    python benchmarks/replay_coverage.py --only marl_chain,wait_loop
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = re.compile(r"rayreact reactor: .*?(\d+) driver API events so far, (\d+) of them replayed")
REFUSAL = re.compile(r"^  (.*) \((x\d+|seen in the recording so far)\)$")


def scripts(only):
    found = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))) + \
        sorted(glob.glob(os.path.join(ROOT, "compat_tests", "*.py")))
    found = [p for p in found if not os.path.basename(p).startswith("_")]
    if only:
        wanted = set(only.split(","))
        found = [p for p in found if os.path.splitext(os.path.basename(p))[0] in wanted]
    return found


def measure(path, quick, timeout):
    args = [sys.executable, "-m", "rayreact", "run", "--explain", path]
    if quick and os.path.basename(os.path.dirname(path)) == "examples":
        args.append("--quick")
    started = time.monotonic()
    try:
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    seconds = time.monotonic() - started
    out = done.stdout + done.stderr
    summary = SUMMARY.search(out)
    if done.returncode != 0 or summary is None:
        return {"error": f"exit {done.returncode}", "tail": out[-600:]}
    refusals, in_refusals = [], False
    for line in out.splitlines():
        if line.startswith("patterns not replayed:"):
            in_refusals = True
        elif in_refusals and REFUSAL.match(line):
            refusals.append(REFUSAL.match(line).groups())
        elif in_refusals:
            in_refusals = False
    fallbacks = out.count("\n  at ") if "fallbacks to dynamic mode:" in out else 0
    events, replayed = int(summary.group(1)), int(summary.group(2))
    return {"events": events, "replayed": replayed, "seconds": seconds, "refusals": refusals,
            "fallbacks": fallbacks}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="pass --quick to the examples")
    parser.add_argument("--only", help="comma list of script names (without .py)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per script")
    ns = parser.parse_args()
    print(f"{'script':<36} {'events':>8} {'replayed':>9} {'fallbacks':>9} {'seconds':>8}  declined")
    for path in scripts(ns.only):
        name = os.path.relpath(path, ROOT)
        got = measure(path, ns.quick, ns.timeout)
        if "error" in got:
            print(f"{name:<36} {got['error']}")
            continue
        share = 100.0 * got["replayed"] / got["events"] if got["events"] else 0.0
        declined = "; ".join(f"{reason} ({n})" for reason, n in got["refusals"]) or "-"
        print(f"{name:<36} {got['events']:>8} {share:>8.0f}% {got['fallbacks']:>9} {got['seconds']:>8.1f}  "
              f"{declined}", flush=True)


if __name__ == "__main__":
    main()
