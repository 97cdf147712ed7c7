"""Worker output reaches the driver deduplicated as Ray does it (core.worker_logs).

The rules are checked on the Deduplicator with a clock the test moves; the end-to-end tests run a script
whose ten actors print the same lines, with deduplication on and off.
"""

import os
import subprocess
import sys

from rayreact.core.worker_logs import Deduplicator, pattern_of


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def line(pid, text, name="Actor"):
    return f"({name} pid={pid}) {text}"


def test_words_with_digits_do_not_make_lines_different():
    assert pattern_of("step 12 of 0x1f done, loss=0.5") == pattern_of("step 7 of 0xab done, loss=0.25")
    assert pattern_of("warning: slow") != pattern_of("warning: fast")


def test_a_line_from_many_workers_is_shown_once_then_summarised_when_its_window_ends():
    clock = Clock()
    dedup = Deduplicator(window_s=5, clock=clock)
    assert dedup.admit(line(1, "deprecated option")) == [line(1, "deprecated option")]
    for pid in range(2, 11):
        assert dedup.admit(line(pid, "deprecated option")) == []
    clock.now = 5.0
    [summary] = dedup.expire()
    assert summary.startswith(line(10, "deprecated option") + " [repeated 9x across cluster]")
    assert "RAY_DEDUP_LOGS=0" in summary          # the first summary says how to turn it off
    # The pattern goes on aggregating in a fresh window; the hint is not repeated.
    assert dedup.admit(line(3, "deprecated option")) == []
    assert dedup.admit(line(4, "deprecated option")) == []
    clock.now = 10.0
    assert dedup.expire() == [line(4, "deprecated option") + " [repeated 2x across cluster]"]


def test_one_worker_repeating_itself_is_shown_in_full():
    dedup = Deduplicator(window_s=5, clock=Clock())
    shown = [out for i in range(4) for out in dedup.admit(line(7, f"episode {i} reward"))]
    assert shown == [line(7, f"episode {i} reward") for i in range(4)]
    assert dedup.flush() == []


def test_a_single_repeat_is_shown_as_itself_and_flush_empties_the_window():
    clock = Clock()
    dedup = Deduplicator(window_s=5, clock=clock)
    dedup.admit(line(1, "ready"))
    assert dedup.admit(line(2, "ready")) == []
    clock.now = 6.0
    assert dedup.expire() == [line(2, "ready")]
    dedup.admit(line(1, "again"))
    dedup.admit(line(2, "again"))
    dedup.admit(line(3, "again"))
    assert [s.split(" [")[0] for s in dedup.flush()] == [line(3, "again")]
    assert dedup.flush() == []


def test_unprefixed_empty_allowed_and_skipped_lines():
    dedup = Deduplicator(window_s=5, allow="KEEP", skip="DROP", clock=Clock())
    assert dedup.admit("raw output of a C library") == ["raw output of a C library"]
    assert dedup.admit("raw output of a C library") == ["raw output of a C library"]
    for pid in (1, 2):
        assert dedup.admit(line(pid, "12 34")) == [line(pid, "12 34")]       # nothing left to compare
        assert dedup.admit(line(pid, "KEEP me")) == [line(pid, "KEEP me")]
        assert dedup.admit(line(pid, "DROP me")) == []


SCRIPT = """
import rayreact as ray
ray.init(num_cpus=2)


@ray.remote
class Chatty:
    def __init__(self):
        print("this option is deprecated")

    def ready(self):
        return True


actors = [Chatty.remote() for _ in range(10)]
assert all(ray.get([a.ready.remote() for a in actors]))
ray.shutdown()
"""


def _run(**env):
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return [ln for ln in done.stdout.splitlines() if "this option is deprecated" in ln]


def test_ten_actors_printing_one_line_show_it_once_and_count_the_rest():
    # A window longer than the run: all ten lines fall in it however loaded the machine is.
    first, summary = _run(RAY_DEDUP_LOGS_AGG_WINDOW_S="120")
    assert first.startswith("(Chatty pid=") and first.endswith(") this option is deprecated")
    assert "this option is deprecated [repeated 9x across cluster]" in summary


def test_dedup_logs_off_shows_every_line():
    shown = _run(RAY_DEDUP_LOGS="0")
    assert len(shown) == 10 and len({ln.split(")")[0] for ln in shown}) == 10
