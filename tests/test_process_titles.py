"""Worker processes carry Ray's titles: what ``ps``, ``top`` and ``pgrep`` show is the same on both backends.

Ray (setproctitle) and rayreact (core.proctitle) both rewrite the command line
(``/proc/<pid>/cmdline``, ``ps -o args``) and the thread name (``comm``, at
most 15 bytes): ``ray::IDLE`` for an idle worker, ``ray::<function>`` while a
task runs, ``ray::<Class>`` for an actor, ``ray::<Class>.<method>`` while it
runs a call.
"""

import os

from conftest import wait_until


def cmdline(pid="self"):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().rstrip(b"\0").decode()


def comm(pid="self"):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


class Titled:
    def __init__(self):
        self.during_init = cmdline()

    def titles(self):
        return self.during_init, cmdline(), os.getpid()


def test_actor_process_title(ray_backend):
    actor = ray_backend.remote(Titled).remote()
    during_init, during_call, pid = ray_backend.get(actor.titles.remote())
    assert during_init == "ray::Titled.__init__"
    assert during_call == "ray::Titled.titles"
    wait_until(lambda: cmdline(pid) == "ray::Titled")
    assert comm(pid) == "ray::Titled"
    ray_backend.kill(actor)


def test_task_process_title(ray_backend):
    def titled_task():
        return cmdline(), comm(), os.getpid()

    during_cmdline, during_comm, pid = ray_backend.get(ray_backend.remote(titled_task).remote())
    assert during_cmdline == "ray::titled_task"
    assert during_comm == "ray::titled_tas"      # the kernel keeps 15 bytes of a thread name
    wait_until(lambda: cmdline(pid) == "ray::IDLE" and comm(pid) == "ray::IDLE")


def test_a_named_method_call_carries_its_name(ray_backend):
    actor = ray_backend.remote(Titled).remote()
    _, named, _ = ray_backend.get(actor.titles.options(name="fetch_weights").remote())
    _, plain, _ = ray_backend.get(actor.titles.remote())
    # A name equal to a method's is still the call's name, not that method's title.
    _, same_as_method, _ = ray_backend.get(actor.titles.options(name="titles").remote())
    assert (named, plain, same_as_method) == ("ray::fetch_weights", "ray::Titled.titles", "ray::titles")
    ray_backend.kill(actor)


class Caller:
    def call_named(self, target):
        return ray_get_from_worker(target.titles.options(name="nested_name").remote())


def ray_get_from_worker(ref):
    import importlib
    for name in ("rayreact", "ray"):   # the backend this worker belongs to
        module = importlib.import_module(name)
        if module.is_initialized():
            return module.get(ref)
    raise RuntimeError("no backend initialized in this worker")


def test_a_named_call_from_an_actor_carries_its_name(ray_backend):
    target = ray_backend.remote(Titled).remote()
    caller = ray_backend.remote(Caller).remote()
    _, title, _ = ray_backend.get(caller.call_named.remote(target))
    assert title == "ray::nested_name"
