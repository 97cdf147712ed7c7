"""Run one script under one backend in a fresh process, with progress and a timeout.

The script writes its JSON report to a file we name; its stdout/stderr go to a
log file (and, with ``verbose``, to our stderr as they arrive). A heartbeat
line shows that a long run is still alive.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Optional

from benchmarks.backends import REPO_ROOT, Backend

HEARTBEAT_S = 15
QUIET_BUSY = 0.2          # a run starts once the machine's cores are this idle (the last run's processes gone)
QUIET_WAIT_S = 20.0       # ... or after this long


@dataclass
class RunResult:
    backend: str
    ok: bool
    wall_s: float
    report: Optional[dict]
    error: str
    log_path: str
    reactor: Optional[dict] = None   # rayreact only: what the reactor replayed (see rayreact_launcher)


def _pump(stream, log, lines, echo_prefix):
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        lines.append(line.rstrip("\n"))
        if echo_prefix is not None:
            print(echo_prefix + line.rstrip("\n"), file=sys.stderr, flush=True)


def _kill_tree(proc):
    """The script and everything it started share its session; end them all."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]          # total, idle + iowait


def wait_for_quiet(window_s=0.3):
    """Wait until the cores are nearly idle: Ray's processes outlive its script by a few seconds, and a run
    started beside them measures them too.  Returns the seconds waited (no wait where /proc is missing)."""
    start = time.monotonic()
    while time.monotonic() - start < QUIET_WAIT_S:
        try:
            total0, idle0 = _cpu_times()
            time.sleep(window_s)
            total1, idle1 = _cpu_times()
        except OSError:
            break
        if total1 > total0 and 1 - (idle1 - idle0) / (total1 - total0) <= QUIET_BUSY:
            break
    return time.monotonic() - start


def run_script(backend: Backend, script, args, work_dir, tag, timeout_s, verbose=False, progress=None):
    """Run `script args` under `backend`; returns a RunResult (never raises for a failing script)."""
    os.makedirs(work_dir, exist_ok=True)
    report_path = os.path.join(work_dir, f"{tag}.json")
    log_path = os.path.join(work_dir, f"{tag}.log")
    reactor_path = os.path.join(work_dir, f"{tag}.reactor.json")
    for stale in (report_path, reactor_path):
        if os.path.exists(stale):
            os.remove(stale)
    command = backend.command(script, [*args, "--report", report_path])
    lines = []
    start = time.perf_counter()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(command) + "\n")
        proc = subprocess.Popen(command, cwd=REPO_ROOT, env=backend.environment(reactor_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc.stdout, log, lines, "    | " if verbose else None),
                                daemon=True)
        pump.start()
        timed_out = False
        while True:
            try:
                proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.perf_counter() - start
                if elapsed > timeout_s:
                    timed_out = True
                    _kill_tree(proc)
                    break
                if progress and not verbose:
                    last = lines[-1][:100] if lines else ""
                    progress(f"    ... {elapsed:.0f} s  {last}")
        pump.join(timeout=5)
    wall_s = time.perf_counter() - start

    report, error = None, ""
    if timed_out:
        error = f"timed out after {timeout_s} s"
    elif proc.returncode != 0:
        error = f"exit status {proc.returncode}: " + " / ".join(lines[-3:])
    else:
        try:
            with open(report_path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            error = f"no report: {e}"
    reactor = None
    if os.path.exists(reactor_path):
        try:
            with open(reactor_path) as f:
                reactor = json.load(f)
        except (OSError, ValueError):
            pass
    return RunResult(backend.name, report is not None, wall_s, report, error, log_path, reactor)
