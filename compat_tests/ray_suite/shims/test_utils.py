"""``ray._private.test_utils`` / ``ray._common.test_utils`` for Ray's tests under rayreact.

Written against the public API only, with the behaviour Ray's test files rely on.
It imports rayreact by its own name: module-level actors defined here are pickled
by reference, and a worker re-importing this module must get rayreact whether or
not it has the ``ray`` alias.
"""

import asyncio
import os
import subprocess
import sys
import time

import rayreact as ray


def client_test_enabled() -> bool:
    return False


def wait_for_condition(condition_predictor, timeout=10, retry_interval_ms=100, raise_exceptions=False,
                       **kwargs):
    """Poll ``condition_predictor(**kwargs)`` until it is truthy; RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            if condition_predictor(**kwargs):
                return
        except Exception as e:
            if raise_exceptions:
                raise
            last_error = e
        time.sleep(retry_interval_ms / 1000.0)
    message = "The condition wasn't met before the timeout expired."
    if last_error is not None:
        message += f" Last exception: {last_error!r}"
    raise RuntimeError(message)


async def async_wait_for_condition(condition_predictor, timeout=10, retry_interval_ms=100, **kwargs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition_predictor(**kwargs)
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(retry_interval_ms / 1000.0)
    raise RuntimeError("The condition wasn't met before the timeout expired.")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def generate_system_config_map(**system_config):
    """``init``/fixture keywords that set Ray's internal ``_system_config`` (rayreact accepts and ignores it)."""
    return {"_system_config": system_config}


def wait_for_pid_to_exit(pid, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.1)
    raise TimeoutError(f"Timed out while waiting for process {pid} to exit.")


@ray.remote(num_cpus=0)
class SignalActor:
    """An event other tasks can wait on: ``wait`` blocks until ``send``."""

    def __init__(self):
        self.ready_event = asyncio.Event()
        self.num_waiters = 0

    def send(self, clear=False):
        self.ready_event.set()
        if clear:
            self.ready_event.clear()

    async def wait(self, should_wait=True):
        if should_wait:
            self.num_waiters += 1
            await self.ready_event.wait()
            self.num_waiters -= 1

    async def cur_num_waiters(self):
        return self.num_waiters


@ray.remote(num_cpus=0)
class Semaphore:
    def __init__(self, value=1):
        self._sema = asyncio.Semaphore(value=value)

    async def acquire(self):
        await self._sema.acquire()

    async def release(self):
        self._sema.release()

    async def locked(self):
        return self._sema.locked()


def run_string_as_driver(driver_script: str, env=None, encode: str = "utf-8"):
    """Run ``driver_script`` in a fresh interpreter with ``ray`` aliased to rayreact; return its output."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    bootstrap = ("import sys; from compat_tests.ray_suite import aliases; aliases.install_for_subprocess(); "
                 "exec(compile(sys.stdin.read(), '<driver>', 'exec'), {'__name__': '__main__'})")
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", bootstrap], input=driver_script.encode(encode),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env)
    output = proc.stdout.decode(encode)
    if proc.returncode:
        print(output)
        raise subprocess.CalledProcessError(proc.returncode, proc.args, output, proc.stderr)
    return output


def run_string_as_driver_nonblocking(driver_script, env=None):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    bootstrap = ("import sys; from compat_tests.ray_suite import aliases; aliases.install_for_subprocess(); "
                 "exec(compile(sys.stdin.read(), '<driver>', 'exec'), {'__name__': '__main__'})")
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-c", bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env)
    proc.stdin.write(driver_script.encode("utf-8"))
    proc.stdin.close()
    return proc


from rayreact.util.queue import Empty as _Empty, Queue as _Queue  # noqa: E402


class BatchQueue(_Queue):
    """A Queue with ``get_batch``: up to ``batch_size`` items, waiting ``first_timeout`` for the
    first and at most ``total_timeout`` in all (0: only what is there once the first came)."""

    def get_batch(self, batch_size=None, total_timeout=None, first_timeout=None):
        try:
            first = self.get(block=True, timeout=first_timeout)
        except _Empty:
            return []
        batch = [first]
        deadline = None if total_timeout is None else time.monotonic() + total_timeout
        while batch_size is None or len(batch) < batch_size:
            try:
                if deadline is None:
                    batch.append(self.get(block=True))
                else:
                    remaining = deadline - time.monotonic()
                    batch.append(self.get_nowait() if remaining <= 0 else self.get(block=True, timeout=remaining))
            except _Empty:
                break
        return batch
