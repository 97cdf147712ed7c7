"""The Cython channel layer: rings, and the session's awake counter that sizes spinning."""
import os
import signal
import threading
import time

import pytest

from rayreact.core import channel

from conftest import wait_until


def test_ring_round_trips_frames_in_order(tmp_path):
    ring = channel.Ring(str(tmp_path / "ring"), 1 << 12, True)
    frames = [b"", b"x", os.urandom(100), os.urandom(1000)]
    for f in frames:
        assert ring.try_write(f)
    assert [ring.read() for _ in frames] == frames
    assert ring.read() is None
    ring.close()


def test_full_ring_refuses_without_writing(tmp_path):
    ring = channel.Ring(str(tmp_path / "ring"), 1 << 10, True)
    written = 0
    while ring.try_write(b"a" * 100):
        written += 1
    assert 0 < written < 11
    assert len(ring.read_all()) == written
    with pytest.raises(ValueError, match="exceeds"):
        ring.try_write(b"a" * 1000)
    ring.close()


def test_a_stalled_reader_is_not_woken_for_each_frame_but_reads_them_all(tmp_path):
    path = str(tmp_path / "ring")
    writer, reader = channel.Ring(path, 1 << 12, True), channel.Ring(path)
    bell = channel.Doorbell(str(tmp_path / "bell"), True)
    poller = channel.Poller(bell)
    poller.set_rings([reader])
    assert writer.wake_wanted()
    reader.set_stalled(True)          # it waits for another ring's frames: these can wait until then
    for i in range(5):
        assert writer.try_write(bytes([i]))
        assert not writer.wake_wanted()
    assert not poller.wait(0.01)      # nor do they end its wait
    reader.set_stalled(False)
    assert writer.wake_wanted()
    assert poller.wait(0.0)
    assert reader.read_all() == [bytes([i]) for i in range(5)]
    writer.close()
    reader.close()
    bell.close()


def test_a_list_of_buffers_is_written_as_one_frame(tmp_path):
    # A scatter write: the parts land one after another in the ring, wrapping around its end like any frame.
    ring = channel.Ring(str(tmp_path / "ring"), 1 << 10, True)
    for round_ in range(12):
        parts = [b"head", memoryview(os.urandom(90)), b"", bytearray(os.urandom(7 + round_))]
        assert ring.try_write(parts)
        assert ring.try_write(b"plain")
        assert ring.read() == b"".join(parts) and ring.read() == b"plain"
    while ring.try_write([b"a" * 50, b"b" * 50]):
        pass
    assert ring.read_all()[-1] == b"a" * 50 + b"b" * 50       # a full ring refused the whole frame, no part
    ring.close()


def test_a_ring_closed_under_a_waiting_writer_does_not_fault(tmp_path):
    # close() gives the shared pages back while another thread may still hold the ring (a writer waiting for
    # room, a late reader): that thread must go on in private memory, never touch an unmapped page.
    ring = channel.Ring(str(tmp_path / "ring"), 1 << 10, True)
    while ring.try_write(b"a" * 100):
        pass
    outcome = []

    def writer():
        try:
            outcome.append(ring.write(b"b" * 100, 30.0))
        except channel.ChannelClosed:
            outcome.append("closed")

    thread = threading.Thread(target=writer)
    thread.start()
    wait_until(lambda: thread.is_alive())
    ring.close()
    thread.join(60)
    assert not thread.is_alive() and outcome == ["closed"]
    assert ring.is_closed()
    assert ring.read() is None                 # nothing readable is left: the file's pages are gone
    (tmp_path / "ring").unlink()
    ring.close()                               # twice is harmless


def test_a_closed_doorbell_does_not_fault(tmp_path):
    bell = channel.Doorbell(str(tmp_path / "bell"), True)
    bell.close()
    bell.ring()                                # on the private page left behind, not a fault
    assert bell.sequence() >= 0 and bell.asleep() in (True, False)


def test_a_ring_between_looking_and_waiting_is_not_slept_through(tmp_path):
    # Thread A reads the bell, finds no work; thread B takes a message and rings; only then A waits.
    bell = channel.Doorbell(str(tmp_path / "bell"), True)
    bell.enter_active()
    poller = channel.Poller(bell)
    poller.set_rings([])
    since = bell.sequence()
    bell.ring()
    returned = threading.Event()
    waiter = threading.Thread(target=lambda: (poller.wait(600.0, False, since), returned.set()), daemon=True)
    waiter.start()
    assert returned.wait(60), "the waiter slept through a ring that came before it waited"
    # Nothing rang since a fresh look: the wait runs to its timeout and reports no data.
    assert poller.wait(0.01, False, bell.sequence()) is False
    bell.leave_active()
    bell.close()


@pytest.fixture
def rayreact_session():
    import rayreact
    rayreact.init(num_cpus=2)
    yield rayreact
    rayreact.shutdown()


def test_idle_workers_are_not_counted_awake(rayreact_session):
    ray = rayreact_session

    @ray.remote
    class Echo:
        def ping(self, i):
            return i

    echo = Echo.remote()
    assert ray.get([echo.ping.remote(i) for i in range(50)]) == list(range(50))
    # Only the driver's main thread is awake once the actor and the task pool sleep.
    wait_until(lambda: channel.awake_processes() == 1, timeout=10)


def _counted_awake_by_whoever_wakes_it(ray, sleep, wake):
    # The process is counted awake again from the moment it is woken (it wants a core from then on), by the
    # waker, and only once: the sleeper does not count itself again when it runs.
    wait_until(lambda: channel.awake_processes() == 1, timeout=10)
    sleeper = threading.Thread(target=sleep)
    sleeper.start()
    wait_until(lambda: channel.awake_processes() == 0, timeout=10)    # (this process' only waiter sleeps)
    wake()
    assert channel.awake_processes() == 1
    sleeper.join(10)
    assert not sleeper.is_alive()
    assert channel.awake_processes() == 1


def test_a_sleeper_rung_awake_is_counted_once_from_the_ring(rayreact_session, tmp_path):
    bell = channel.Doorbell(str(tmp_path / "bell"), True)
    bell.enter_active()
    poller = channel.Poller(bell)
    _counted_awake_by_whoever_wakes_it(rayreact_session, lambda: poller.wait(10), bell.ring)
    bell.leave_active()
    bell.close()


def test_the_driver_asleep_in_a_gather_is_not_awake_until_its_results_come(rayreact_session, tmp_path):
    from rayreact.core import reactor
    gather = reactor.Gather(str(tmp_path / "gather"), True)
    _counted_awake_by_whoever_wakes_it(rayreact_session, lambda: gather.wait(1, 10), gather.bump)
    gather.close()


def test_workers_killed_as_calls_wake_them_leave_the_count_where_it_was(rayreact_session):
    # The call's ring counts the sleeping worker awake; killed before it runs, it must come off again.
    ray = rayreact_session

    @ray.remote
    class Idle:
        def f(self):
            return 1

    for _ in range(6):
        idle = Idle.remote()
        assert ray.get(idle.f.remote()) == 1
        wait_until(lambda: channel.awake_processes() == 1, timeout=10)      # (it sleeps)
        idle.f.remote()
        ray.kill(idle)
    wait_until(lambda: channel.awake_processes() == 1, timeout=10)


def test_a_worker_killed_while_awake_is_taken_off_the_count(rayreact_session):
    ray = rayreact_session

    @ray.remote
    class Busy:
        def pid(self):
            return os.getpid()

        def spin(self):
            while True:
                pass

    busy = Busy.remote()
    pid = ray.get(busy.pid.remote())
    busy.spin.remote()
    wait_until(lambda: channel.awake_processes() == 2, timeout=10)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: channel.awake_processes() == 1, timeout=10)
