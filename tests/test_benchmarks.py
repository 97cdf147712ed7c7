"""The benchmark harness: ``python -m benchmarks --quick`` runs every workload and writes its files.

CI checks that the suite runs and that every backend computed the same
results where a workload is deterministic; it never checks speed. The speedup
arithmetic (which direction is "faster") is checked on plain numbers.
"""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks import report, workloads  # noqa: E402
from benchmarks.backends import RAY, RAYREACT, RAYREACT_COLOCATED, RAYREACT_NO_REACTOR  # noqa: E402
from benchmarks.runner import RunResult  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1500)
    return proc, out


@pytest.mark.timeout(1600)
def test_quick_benchmark_succeeds_and_writes_its_files(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for name in ["results.md", "results.json", "summary.png"] + [f"{w.name}.png" for w in workloads.WORKLOADS]:
        path = out / name
        assert path.exists() and path.stat().st_size > 0, name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == PNG_MAGIC, name
    markdown = (out / "results.md").read_text()
    assert "| workload | metric | Ray | rayreact |" in markdown
    assert "Machine:" in markdown and "Ray 2." in markdown
    assert "| workload | metric | Ray | rayreact |" in proc.stdout  # the table is also printed


@pytest.mark.timeout(1600)
def test_quick_benchmark_results_cover_every_workload_and_backend(quick_run):
    proc, out = quick_run
    results = json.loads((out / "results.json").read_text())
    assert results["quick"] is True
    assert results["machine"]["usable_cores"] >= 1 and results["machine"]["packages"]["ray"]
    assert [w["name"] for w in results["workloads"]] == [w.name for w in workloads.WORKLOADS]
    for w in results["workloads"]:
        for backend in (RAY.name, RAYREACT.name, RAYREACT_NO_REACTOR.name, RAYREACT_COLOCATED.name):
            assert w["runs"][backend]["ok"], (w["name"], backend, w["runs"][backend]["error"])
        assert w["metrics"], w["name"]
        for row in w["metrics"]:
            assert row["values"][RAY.name] > 0 and row["values"][RAYREACT.name] > 0, (w["name"], row["name"])
            assert row["speedup"][RAYREACT.name] > 0
        # every workload here but async_ps and apex is deterministic: all four runs must agree exactly (they
        # answer calls in completion order, which timing decides on every backend)
        if w["name"] in ("async_ps", "apex"):
            assert not w["deterministic"] and w["checksums_equal"] is None, w["checksums"]
        else:
            assert w["deterministic"] and w["checksums_equal"] is True, (w["name"], w["checksums"])


@pytest.mark.timeout(1600)
def test_quick_benchmark_switches_the_reactor(quick_run):
    proc, out = quick_run
    results = json.loads((out / "results.json").read_text())
    for w in results["workloads"]:
        on, off = w["runs"][RAYREACT.name], w["runs"][RAYREACT_NO_REACTOR.name]
        if results["reactor_available"]:
            assert on["reactor"] is not None and on["reactor"].get("enabled") is True, (w["name"], on["reactor"])
            assert off["reactor"] is not None and off["reactor"].get("enabled") is False, (w["name"], off["reactor"])
        else:  # nothing to switch: the off column is the on run, and the results say so
            assert off == on
            assert "not built yet" in (out / "results.md").read_text()
        # The co-located column ran its actors on host processes, and says where each went.
        colocated = w["runs"][RAYREACT_COLOCATED.name]["reactor"]
        assert any("co-location:" in line for line in colocated["colocation"]), (w["name"], colocated)


def _run(backend, value):
    return RunResult(backend, True, 1.0, {"observations_per_s": value, "checksum": "x", "deterministic": True},
                     "", "log")


def test_speedup_is_relative_to_ray_in_the_right_direction():
    assert report.speedup(True, 100.0, 250.0) == pytest.approx(2.5)    # rate: higher is better
    assert report.speedup(False, 100.0, 25.0) == pytest.approx(4.0)    # time: lower is better
    assert report.speedup(False, 100.0, 0.0) is None


def test_reactor_off_column_repeats_rayreact_when_there_is_no_reactor():
    gym = workloads.BY_NAME["gym"]
    runs = {RAY.name: _run(RAY.name, 100.0), RAYREACT.name: _run(RAYREACT.name, 900.0)}
    entry = report.compare_workload(gym, runs, reactor_available=False)
    [row] = entry["metrics"]
    assert row["speedup"][RAYREACT.name] == pytest.approx(9.0)
    assert row["speedup"][RAYREACT_NO_REACTOR.name] == pytest.approx(9.0)
    assert row["met"] is True  # gym's target is 8x
    assert entry["checksums_equal"] is True


def test_target_not_met_and_checksum_mismatch_are_reported():
    gym = workloads.BY_NAME["gym"]
    runs = {RAY.name: _run(RAY.name, 100.0), RAYREACT.name: _run(RAYREACT.name, 300.0),
            RAYREACT_NO_REACTOR.name: _run(RAYREACT_NO_REACTOR.name, 200.0)}
    runs[RAYREACT.name].report["checksum"] = "y"
    entry = report.compare_workload(gym, runs, reactor_available=True)
    [row] = entry["metrics"]
    assert row["met"] is False
    assert row["speedup"][RAYREACT_NO_REACTOR.name] == pytest.approx(2.0)
    assert entry["checksums_equal"] is False
    results = {"workloads": [entry], "reactor_available": True, "machine": {"usable_cores": 2}}
    assert "❌ differ" in report.markdown_table(results)
    assert any("different results" in note for note in report.notes(results))


def test_the_floor_spread_over_the_cores_is_printed_with_each_columns_fraction_of_it():
    gym = workloads.BY_NAME["gym"]
    runs = {RAY.name: _run(RAY.name, 100.0), RAYREACT.name: _run(RAYREACT.name, 300.0)}
    spread = _run("spread", 600.0)
    entry = report.compare_workload(gym, runs, reactor_available=False, spread=spread)
    [row] = entry["metrics"]
    assert row["spread_value"] == 600.0
    assert row["fraction_of_spread"][RAYREACT.name] == pytest.approx(0.5)
    assert entry["checksums"]["spread"] == "x" and entry["checksums_equal"] is True
    results = {"workloads": [entry], "reactor_available": True, "machine": {"usable_cores": 2}}
    [note] = [n for n in report.notes(results) if "a plain process per core" in n]
    assert "600" in note and "rayreact 50%" in note
    spread.report["checksum"] = "z"          # the same envs seeded alike must give the same results
    entry = report.compare_workload(gym, runs, reactor_available=False, spread=spread)
    assert entry["checksums_equal"] is False
    failed = RunResult("spread", False, 1.0, {}, "exit status 1", "log")
    entry = report.compare_workload(gym, runs, reactor_available=False, spread=failed)
    results = {"workloads": [entry], "reactor_available": True, "machine": {"usable_cores": 2}}
    assert "gym with no Ray, a plain process per core failed: exit status 1" in report.notes(results)


def test_the_fault_script_runs_under_rayreact(tmp_path):
    # Not a workload of the harness (it kills workers): run by hand, as README's fault figures were.
    out = tmp_path / "faults.json"
    proc = subprocess.run([sys.executable, "-m", "rayreact", "run", "benchmarks/scripts/faults.py", "--quick",
                           "--json", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    assert set(figures) == {"actor", "actor_after_loop", "task"}
    assert all(f["median_ms"] > 0 for f in figures.values())
