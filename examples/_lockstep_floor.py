"""The floor of a lock-step env round spread over the cores, with no runtime at all.

The env examples' ``--spread N``: the same envs, seeded alike, stepped by N plain
forked processes, each owning every N-th env. What a round costs then is the
envs' own work over the cores, plus the least any multi-process design pays:

    driver --actions (a pipe per process)--> process k steps envs k, k+N, ...
    driver <--rewards, dones (the same pipe)--
    driver <--observations (one shared-memory slot per env, written in place)--

One message each way per process per round, frames read in place (other
observations pickled with the rewards), no scheduler: a runtime that hosts the
envs as actors can at best come near it. The benchmarks print it beside the
one-process rate, so that the distance to what the machine allows is read in
the same run.
"""

import mmap
import multiprocessing

import numpy as np


class LockstepFloor:
    """``one_round(actions)`` -> [(obs, reward, done)] in env order, from ``processes`` forked processes.

    ``make_runner(i)`` builds env ``i`` in its process (an object with ``reset()`` and ``step(action)``
    returning ``(obs, reward, done)``); ``obs_shape``/``obs_dtype``: every observation's, if fixed (they
    then travel through shared memory and ``obs`` is a read-only view valid until the next round)."""

    def __init__(self, make_runner, count, processes, obs_shape=None, obs_dtype=None):
        self.count = count
        self.shared = None
        if obs_shape is not None:
            size = int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize
            self._buffer = mmap.mmap(-1, max(1, size * count))     # anonymous, MAP_SHARED: inherited by fork
            self.shared = np.frombuffer(self._buffer, dtype=obs_dtype).reshape((count,) + tuple(obs_shape))
        context = multiprocessing.get_context("fork")
        self.pipes, self.processes = [], []
        for k in range(processes):
            mine, theirs = context.Pipe()
            process = context.Process(target=self._serve, args=(theirs, mine, make_runner,
                                                                range(k, count, processes)), daemon=True)
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)
        if self.shared is not None:
            self.shared.flags.writeable = False      # (here: the driver reads what the processes write)
        self.first_obs = self._gather([pipe.recv() for pipe in self.pipes], with_steps=False)

    def _serve(self, pipe, drivers_end, make_runner, indices):
        for end in (drivers_end, *self.pipes):
            end.close()                 # (so that a driver that dies ends this process's recv)
        runners = {i: make_runner(i) for i in indices}
        pipe.send([(i, self._place(i, runners[i].reset())) for i in indices])
        while True:
            actions = pipe.recv()
            if actions is None:
                return
            out = []
            for i, runner in runners.items():
                obs, reward, done = runner.step(actions[i])
                out.append((i, self._place(i, obs), reward, done))
            pipe.send(out)

    def _place(self, i, obs):
        if self.shared is None:
            return obs
        self.shared[i] = obs
        return None

    def _gather(self, replies, with_steps=True):
        results = [None] * self.count
        for reply in replies:
            for item in reply:
                i, obs = item[0], item[1]
                if self.shared is not None:
                    obs = self.shared[i]
                results[i] = (obs,) + tuple(item[2:]) if with_steps else obs
        return results

    def one_round(self, actions):
        for pipe in self.pipes:
            pipe.send(actions)
        return self._gather([pipe.recv() for pipe in self.pipes])

    def close(self):
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join()
