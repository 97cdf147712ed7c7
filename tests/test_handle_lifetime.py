"""Actor lifetime follows its handles in every process, as in Ray.

An unnamed, non-detached actor exits once no handle to it exists anywhere (the
driver, tasks, other actors, values in flight) and its pending calls are done.
Each test watches the actor's process: the actor reports ``os.getpid()`` and the
test waits until that process is gone (or proves it alive by calling it).
"""

import gc
import os

import pytest

from conftest import wait_for_file, wait_until


class Target:
    def pid(self):
        return os.getpid()


def process_exists(pid):
    """True while ``pid`` runs (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def drop(*_):
    gc.collect()


def test_handle_passed_to_a_task_that_keeps_nothing(ray_backend):
    actor = ray_backend.remote(Target).remote()
    pid = ray_backend.get(actor.pid.remote())

    def use(handle):
        return ray_backend.get(handle.pid.remote())

    assert ray_backend.get(ray_backend.remote(use).remote(actor)) == pid
    del actor
    drop()
    wait_until(lambda: not process_exists(pid))


def test_running_task_keeps_the_actor_after_the_driver_drops_it(ray_backend, gate):
    actor = ray_backend.remote(Target).remote()
    pid = ray_backend.get(actor.pid.remote())

    def use_later(handle, gate_path):
        wait_for_file(gate_path)
        return ray_backend.get(handle.pid.remote())

    result = ray_backend.remote(use_later).remote(actor, gate.path)
    del actor
    drop()
    # The task still holds a handle: its call after the driver dropped ours must reach the same process.
    ray_backend.get(ray_backend.remote(lambda: None).remote())
    gate.open()
    assert ray_backend.get(result) == pid
    wait_until(lambda: not process_exists(pid))


def test_handle_in_arguments_of_a_pending_task_keeps_the_actor(ray_backend, gate):
    actor = ray_backend.remote(Target).remote()
    pid = ray_backend.get(actor.pid.remote())

    def blocker(gate_path):
        wait_for_file(gate_path)
        return "ready"

    def use(ready, box):
        return ready, ray_backend.get(box[0].pid.remote())

    result = ray_backend.remote(use).remote(ray_backend.remote(blocker).remote(gate.path), [actor])
    del actor
    drop()
    gate.open()
    assert ray_backend.get(result) == ("ready", pid)
    wait_until(lambda: not process_exists(pid))


def test_another_actor_holding_the_handle_keeps_it_alive(ray_backend):
    class Keeper:
        def keep(self, box):
            self.kept = box[0]
            return True

        def call_kept(self):
            return ray_backend.get(self.kept.pid.remote())

        def forget(self):
            self.kept = None
            gc.collect()
            return True

    actor = ray_backend.remote(Target).remote()
    pid = ray_backend.get(actor.pid.remote())
    keeper = ray_backend.remote(Keeper).remote()
    assert ray_backend.get(keeper.keep.remote([actor]))
    del actor
    drop()
    for _ in range(3):
        assert ray_backend.get(keeper.call_kept.remote()) == pid
    assert process_exists(pid)
    assert ray_backend.get(keeper.forget.remote())
    wait_until(lambda: not process_exists(pid))
    assert ray_backend.get(keeper.keep.remote([None]))   # the keeper itself lives on


def test_actor_created_in_a_task_and_returned_to_the_driver(ray_backend):
    def make():
        target = ray_backend.remote(Target).remote()
        return [target, ray_backend.get(target.pid.remote())]

    ref = ray_backend.remote(make).remote()
    [actor, pid] = ray_backend.get(ref)
    del ref
    drop()
    # The task is over and its worker dropped its handle: the driver's copy keeps the actor.
    assert ray_backend.get(actor.pid.remote()) == pid
    assert ray_backend.get(actor.pid.remote()) == pid
    del actor
    drop()
    wait_until(lambda: not process_exists(pid))


def test_handle_inside_a_stored_value_keeps_the_actor(ray_backend):
    def make():
        target = ray_backend.remote(Target).remote()
        ray_backend.get(target.pid.remote())
        return [target]

    ref = ray_backend.remote(make).remote()
    ray_backend.wait([ref])
    drop()
    # Only the value behind ``ref`` names the actor now.
    [actor] = ray_backend.get(ref)
    pid = ray_backend.get(actor.pid.remote())
    del actor
    drop()
    [again] = ray_backend.get(ref)
    assert ray_backend.get(again.pid.remote()) == pid
    del again, ref
    drop()
    wait_until(lambda: not process_exists(pid))


def test_pending_calls_finish_after_the_last_handle_goes(ray_backend):
    actor = ray_backend.remote(Target).remote()
    pid = ray_backend.get(actor.pid.remote())
    results = [actor.pid.remote() for _ in range(5)]
    del actor
    drop()
    assert ray_backend.get(results) == [pid] * 5
    wait_until(lambda: not process_exists(pid))


def test_named_actor_is_collected_once_its_handles_are_gone(ray_backend):
    # Ray 2.x collects named actors like unnamed ones; only detached actors outlive their handles.
    actor = ray_backend.remote(Target).options(name="handle-lifetime-named").remote()
    pid = ray_backend.get(actor.pid.remote())
    del actor
    drop()
    wait_until(lambda: not process_exists(pid))
    with pytest.raises(ValueError):
        ray_backend.get_actor("handle-lifetime-named")


def test_handles_found_by_name_do_not_keep_the_actor_alive(ray_backend):
    # As in Ray: only the handle .remote() returned, and its copies, count; lookups by name do not.
    class Finder:
        def find(self, name):
            self.found = ray_backend.get_actor(name)
            return ray_backend.get(self.found.pid.remote())

        def ping(self):
            return "pong"

    actor = ray_backend.remote(Target).options(name="handle-lifetime-found").remote()
    pid = ray_backend.get(actor.pid.remote())
    finder = ray_backend.remote(Finder).remote()
    assert ray_backend.get(finder.find.remote("handle-lifetime-found")) == pid
    found_here = ray_backend.get_actor("handle-lifetime-found")
    assert ray_backend.get(found_here.pid.remote()) == pid
    del actor
    drop()
    wait_until(lambda: not process_exists(pid))
    assert ray_backend.get(finder.ping.remote()) == "pong"   # the finder itself lives on


def test_detached_actor_outlives_its_handles(ray_backend):
    actor = ray_backend.remote(Target).options(name="handle-lifetime-detached", lifetime="detached").remote()
    pid = ray_backend.get(actor.pid.remote())
    del actor
    drop()
    ray_backend.get(ray_backend.remote(lambda: None).remote())
    again = ray_backend.get_actor("handle-lifetime-detached")
    assert ray_backend.get(again.pid.remote()) == pid
    ray_backend.kill(again)
    wait_until(lambda: not process_exists(pid))



def test_a_non_detached_actor_dies_with_the_worker_that_created_it(ray_backend):
    import signal as signals

    from conftest import wait_until_calls_fail

    child_class = ray_backend.remote(Target)

    class Owner:
        def make_child(self, lifetime):
            self.child = child_class.options(lifetime=lifetime).remote() if lifetime else child_class.remote()
            ray_backend.get(self.child.pid.remote())
            return self.child

        def pid(self):
            return os.getpid()

    owner = ray_backend.remote(Owner).remote()
    child = ray_backend.get(owner.make_child.remote(None))
    kept = ray_backend.get(owner.make_child.remote("detached"))
    child_pid = ray_backend.get(child.pid.remote())
    os.kill(ray_backend.get(owner.pid.remote()), signals.SIGKILL)
    # The driver still holds a handle: the child ends all the same (Ray's actors share their owner's fate).
    wait_until_calls_fail(ray_backend, child.pid.remote)
    wait_until(lambda: not process_exists(child_pid))
    assert ray_backend.get(kept.pid.remote()) != child_pid     # a detached one lives on
    ray_backend.kill(kept)
