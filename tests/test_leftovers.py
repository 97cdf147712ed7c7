"""No shared-memory file outlives a session, however its processes are killed (rayreact only).

A driver runs in a subprocess; the test kills it with SIGKILL in several orders
(its process group, every process at once, the zygote first...) and checks that
its ``rr-<session>`` directory and files are gone, either removed by the surviving zygote
or swept by the next ``init`` (core.leftovers).  Also: a sweep never touches a
live session, and files of sessions from before the session lock are removed
only when nobody maps them.
"""

import glob
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import wait_until
from rayreact.core import leftovers

VICTIM = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import rayreact as ray
    ray.init(num_cpus=2, object_store_memory=80 * 2**20)
    from rayreact.core import context

    @ray.remote
    class Holder:
        def big(self):
            return np.ones(1 << 18)
        def pid(self):
            return os.getpid()

    @ray.remote
    def task_pid(x):
        return os.getpid()

    holder = Holder.remote()
    kept = [holder.big.remote(), ray.put(np.zeros(1 << 18)), task_pid.remote(np.ones(1 << 18))]
    ray.get(kept)
    spilled = [ray.put(np.ones(30 * 2**20 // 8)) for _ in range(3)]     # past the limit: files on disk
    rt = context.dynamic_runtime()
    forked = 0
    if os.environ.get("VICTIM_FORKS"):
        forked = os.fork()       # a child holding every descriptor of the driver, the zygote's stdin included
        if forked == 0:
            time.sleep(600)
            os._exit(0)
    print("READY", rt.session, rt.zygote.pid, ray.get(holder.pid.remote()), forked, rt.spill_dir, flush=True)
    while True:
        time.sleep(0.05)
""")

SWEEPING_INIT = "import rayreact; rayreact.init(num_cpus=1); rayreact.shutdown()"


def session_files(session, spill_dir=None):
    spilled = glob.glob(os.path.join(spill_dir, f"rr-{session}-*")) if spill_dir else []
    own_dir = f"/dev/shm/rr-{session}"      # the session's private directory (core.session_dir) and its files
    return glob.glob(f"/dev/shm/rr-{session}-*") + glob.glob(own_dir) + glob.glob(f"{own_dir}/*") + spilled


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


class Victim:
    """A rayreact driver in its own process group, with an actor, a task worker and segments."""

    def __init__(self, tmp_path, forks=False):
        script = tmp_path / "victim.py"
        script.write_text(VICTIM)
        env = dict(os.environ, VICTIM_FORKS="1" if forks else "")
        self.proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                                     start_new_session=True, env=env)
        line = self.proc.stdout.readline().split()
        assert line and line[0] == "READY", f"the driver did not start: {line}"
        self.session, self.zygote, self.actor = line[1], int(line[2]), int(line[3])
        self.forked = [int(line[4])] if forks else []
        self.spill_dir = line[5]
        self.workers = children_of(self.zygote)
        assert self.actor in self.workers
        assert session_files(self.session)
        assert [p for p in self.files() if p.startswith(self.spill_dir) and not p.endswith("-lock")]

    def files(self):
        return session_files(self.session, self.spill_dir)

    def processes(self):
        return [self.proc.pid, self.zygote] + self.workers + self.forked

    def reap(self):
        self.proc.stdout.close()
        self.proc.wait(timeout=60)

    def kill_rest(self):
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def victim(tmp_path):
    v = Victim(tmp_path)
    yield v
    v.kill_rest()
    v.reap()


def sweeping_init():
    subprocess.run([sys.executable, "-c", SWEEPING_INIT], check=True, timeout=120)


def kill(pids):
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def test_killing_the_drivers_process_group_leaves_nothing(victim):
    os.killpg(victim.proc.pid, signal.SIGKILL)
    victim.reap()
    # The zygote is in a session of its own: it saw the driver go and cleaned up, with no init needed.
    wait_until(lambda: not any(alive(p) for p in victim.processes()))
    wait_until(lambda: not victim.files())
    assert not os.path.exists(victim.spill_dir)


@pytest.mark.parametrize("order", ["all_at_once", "zygote_then_driver", "worker_zygote_driver"])
def test_files_of_a_session_killed_outright_go_at_the_next_init(victim, order):
    if order == "all_at_once":
        kill([victim.zygote, victim.proc.pid] + victim.workers)
    elif order == "zygote_then_driver":
        kill([victim.zygote])
        wait_until(lambda: not any(alive(p) for p in victim.workers))   # they die with the zygote
        kill([victim.proc.pid])
    else:
        kill([victim.actor])
        kill([victim.zygote])
        kill([victim.proc.pid])
    victim.reap()
    wait_until(lambda: not any(alive(p) for p in victim.processes()))
    # Nobody was left to clean up (unless another session's init on this machine swept already).
    sweeping_init()
    assert victim.files() == []


def test_files_left_by_a_dead_session_are_there_until_swept(tmp_path):
    # The leak the sweep exists for, shown in a private directory no other session sweeps.
    shm = tmp_path / "shm"
    shm.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time
        from rayreact.core import leftovers
        fd = leftovers.hold_session_lock({str(shm)!r}, "0123abcd")
        open(os.path.join({str(shm)!r}, "rr-0123abcd-w0-bell"), "w").close()
        print("HELD", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HELD"
        assert leftovers.sweep([str(shm)]) == []          # alive: untouched
        assert sorted(os.listdir(shm)) == ["rr-0123abcd-lock", "rr-0123abcd-w0-bell"]
        holder.kill()
        holder.wait()
        assert sorted(os.listdir(shm)) == ["rr-0123abcd-lock", "rr-0123abcd-w0-bell"]
        assert leftovers.sweep([str(shm)]) == ["0123abcd"]
        assert os.listdir(shm) == []
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_child_the_driver_forked_does_not_keep_the_session_after_the_driver(tmp_path):
    victim = Victim(tmp_path, forks=True)
    try:
        kill([victim.proc.pid])
        victim.reap()
        # The child still holds the zygote's stdin open (no EOF): the zygote notices its new parent instead.
        wait_until(lambda: not any(alive(p) for p in [victim.zygote] + victim.workers))
        wait_until(lambda: not victim.files())
        assert alive(victim.forked[0])
    finally:
        victim.kill_rest()
        if victim.proc.returncode is None:
            victim.reap()


def test_sweep_spares_a_live_session(victim):
    before = set(victim.files())
    sweeping_init()
    assert before <= set(victim.files())
    assert all(alive(p) for p in victim.processes())


def test_files_from_before_the_session_lock_go_only_when_unmapped(tmp_path):
    d = str(tmp_path)
    old = time.time() - 2 * leftovers.LEGACY_QUIET_SECONDS
    for name in ["rr-aaaa0001-driver-bell", "rr-aaaa0001-w0-in", "rr-bbbb0002-driver-bell", "rr-cccc0003-x"]:
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        if not name.startswith("rr-cccc"):
            os.utime(path, (old, old))
    with open(os.path.join(d, "rr-bbbb0002-driver-bell"), "r+b") as f:
        mapping = mmap.mmap(f.fileno(), 4096)      # a live process of session bbbb0002 maps it
    try:
        removed = leftovers.sweep([d])
    finally:
        mapping.close()
    assert removed == ["aaaa0001"]
    # bbbb0002 is mapped; cccc0003 changed recently (it may be a session starting up).
    assert sorted(os.listdir(d)) == ["rr-bbbb0002-driver-bell", "rr-cccc0003-x"]
