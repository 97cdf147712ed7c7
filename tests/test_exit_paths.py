"""Exit paths and error types a caller meets, the same on real Ray and on rayreact.

``sys.exit()`` in a task ends its worker (the caller gets ``WorkerCrashedError``, not an error that is
itself a ``SystemExit``); an exception whose class the driver cannot load arrives as
``UnserializableException`` with the remote traceback; ``get`` treats a negative timeout as none and
rejects a list holding a non-ref with ``TypeError``.
"""

import os
import subprocess
import sys

import pytest

GET_TIMEOUT = 120

GHOST_MODULE = """
class GhostError(Exception):
    pass


class NeedsTwoArguments(Exception):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b
"""


def exit_with(code):
    sys.exit(code)


def raise_ghost(directory, kind):
    # The module exists only on the worker's path: the driver never imports it.
    sys.path.insert(0, directory)
    import ghost_errors_only_workers_have as ghost
    if kind == "unimportable":
        raise ghost.GhostError("boo")
    raise ghost.NeedsTwoArguments("x", "y")


class NeedsTwo(Exception):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b


def raise_needs_two():
    raise NeedsTwo("x", "y")


def one():
    return 1


@pytest.mark.parametrize("code", [3, "bye", 0, None])
def test_sys_exit_in_a_task_is_a_worker_crash(ray_backend, code):
    ref = ray_backend.remote(max_retries=0)(exit_with).remote(code)
    with pytest.raises(ray_backend.exceptions.WorkerCrashedError) as info:
        ray_backend.get(ref, timeout=GET_TIMEOUT)
    assert not isinstance(info.value, SystemExit)


def test_sys_exit_in_a_task_is_retried_like_a_crash(ray_backend, tmp_path):
    marker = tmp_path / "attempts"

    def exit_first_time(path):
        import os
        first = not os.path.exists(path)
        with open(path, "a") as f:
            f.write("x")
        if first:
            sys.exit(1)
        return "second attempt"

    ref = ray_backend.remote(max_retries=1)(exit_first_time).remote(str(marker))
    assert ray_backend.get(ref, timeout=GET_TIMEOUT) == "second attempt"
    assert marker.read_text() == "xx"
    # The pool goes on after its worker ended.
    assert ray_backend.get(ray_backend.remote(one).remote(), timeout=GET_TIMEOUT) == 1


@pytest.mark.parametrize("kind", ["unimportable", "constructor_wants_two_arguments"])
def test_an_exception_the_driver_cannot_load_is_unserializable(ray_backend, tmp_path, kind):
    (tmp_path / "ghost_errors_only_workers_have.py").write_text(GHOST_MODULE)
    ref = ray_backend.remote(max_retries=0)(raise_ghost).remote(str(tmp_path), kind)
    with pytest.raises(ray_backend.exceptions.UnserializableException) as info:
        ray_backend.get(ref, timeout=GET_TIMEOUT)
    text = str(info.value)
    assert text.startswith("Failed to deserialize exception.")
    assert "raise_ghost" in text and ("GhostError: boo" in text or "NeedsTwoArguments: x" in text)
    assert "ghost_errors_only_workers_have" not in sys.modules


def test_a_local_exception_class_that_cannot_be_rebuilt_is_unserializable(ray_backend):
    with pytest.raises(ray_backend.exceptions.UnserializableException) as info:
        ray_backend.get(ray_backend.remote(max_retries=0)(raise_needs_two).remote(), timeout=GET_TIMEOUT)
    assert "NeedsTwo: x" in str(info.value)


def test_get_with_a_negative_timeout_waits_as_with_none(ray_backend):
    ref = ray_backend.remote(one).remote()
    assert ray_backend.get(ref, timeout=-1) == 1
    assert ray_backend.get([ref], timeout=-5) == [1]


def test_wait_rejects_a_negative_timeout(ray_backend):
    ref = ray_backend.remote(one).remote()
    with pytest.raises(ValueError, match="nonnegative"):
        ray_backend.wait([ref], timeout=-1)


def test_get_of_a_list_holding_a_value_is_a_type_error(ray_backend):
    ref = ray_backend.remote(one).remote()
    with pytest.raises(TypeError, match="Attempting to call `get` on the value 5"):
        ray_backend.get([ref, 5])


class Restartable:
    def die(self):
        import os
        os._exit(1)

    def pid(self):
        import os
        return os.getpid()


def test_a_call_in_flight_when_a_restartable_actor_dies_is_unavailable(ray_backend):
    actor = ray_backend.remote(max_restarts=1)(Restartable).remote()
    first = ray_backend.get(actor.pid.remote(), timeout=GET_TIMEOUT)
    with pytest.raises(ray_backend.exceptions.ActorUnavailableError) as info:
        ray_backend.get(actor.die.remote(), timeout=GET_TIMEOUT)
    assert isinstance(info.value, ray_backend.exceptions.RayActorError)
    assert "may or may not have been executed" in str(info.value)
    assert ray_backend.get(actor.pid.remote(), timeout=GET_TIMEOUT) != first


# --- a clean exit and the work still in flight ---------------------------------------------------------

EXIT_SCRIPT = """
import os, sys, time
import rayreact as ray

out = sys.argv[1]
ray.init(num_cpus=2)


@ray.remote
def write(i, seconds):
    time.sleep(seconds)                      # the work itself: a task that is still running at exit
    with open(os.path.join(out, f"task-{{i}}"), "w") as f:
        f.write("done")


@ray.remote
class Journal:
    def __init__(self):
        self.path = os.path.join(out, "journal")

    def add(self, i):
        with open(self.path, "a") as f:
            f.write(f"{{i}}\\n")


{body}
"""


def _run_exit_script(tmp_path, body, **env):
    script = tmp_path / "script.py"
    script.write_text(EXIT_SCRIPT.format(body=body))
    return subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


def test_tasks_submitted_as_the_last_lines_finish_before_exit(tmp_path):
    done = _run_exit_script(tmp_path, "refs = [write.remote(i, 0.2) for i in range(6)]")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("task-*")) == [f"task-{i}" for i in range(6)]
    assert "RAYREACT_EXIT_TIMEOUT_S" not in done.stderr


def test_calls_left_in_flight_by_a_replaying_loop_finish_before_exit(tmp_path):
    # The loop replays; the script ends inside a period (its get never comes), with calls in flight.
    body = """journal = Journal.remote()
for i in range(60):
    journal.add.remote(i)
    ray.get(journal.add.remote(-1))
journal.add.remote(60)
journal.add.remote(-1)"""
    done = _run_exit_script(tmp_path, body, RAYREACT_EXPLAIN="1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "journal").read_text().split() == [str(v) for i in range(61) for v in (i, -1)]
    assert "ended: the script ended" in done.stderr


def test_exit_gives_up_after_the_bound_and_says_so(tmp_path):
    done = _run_exit_script(tmp_path, "ref = write.remote('slow', 3600)\nquick = write.remote('quick', 0)",
                            RAYREACT_EXIT_TIMEOUT_S="1")
    assert done.returncode == 0, done.stderr
    assert "1 results of tasks or actor calls were still unfinished 1 s after the script ended" in done.stderr
    assert (tmp_path / "task-quick").exists() and not (tmp_path / "task-slow").exists()


def test_exit_after_an_unhandled_exception_does_not_wait(tmp_path):
    done = _run_exit_script(tmp_path, "ref = write.remote('slow', 3600)\nraise RuntimeError('the script failed')")
    assert done.returncode == 1
    assert "the script failed" in done.stderr and "RAYREACT_EXIT_TIMEOUT_S" not in done.stderr
