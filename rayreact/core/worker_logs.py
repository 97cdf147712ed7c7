"""Worker output on the driver's terminal, with Ray's prefix and Ray's deduplication (``RAY_DEDUP_LOGS``).

::

    worker print() ─▶ sys.stdout / sys.stderr (core.worker's line prefixer: "(Name pid=N) " + line)
        └─▶ fd 1 / fd 2, inherited from the zygote: the session's two log pipes (writes of whole lines,
            at most PIPE_BUF bytes each, so lines of different workers never mix)
    driver: the "rayreact-logs" thread ─ poll both pipes ─▶ whole lines ─▶ Deduplicator ─▶ driver fd 1 / fd 2

A line that several workers print (ten actors warning the same thing) is shown once when it first comes,
and once more at the end of its aggregation window, as ``... [repeated 9x across cluster]``.  Two lines
are "the same" when they are equal once every word holding a digit is left out (pids, counters and
addresses differ between workers).  Repeats from one worker alone are all shown.  ``RAY_DEDUP_LOGS=0``
turns it off; ``RAY_DEDUP_LOGS_AGG_WINDOW_S`` (5), ``RAY_DEDUP_LOGS_ALLOW_REGEX`` (lines never held
back) and ``RAY_DEDUP_LOGS_SKIP_REGEX`` (lines dropped) are read when a session starts, as Ray names them.
Lines that carry no worker prefix (a C library writing to fd 1) pass through unchanged.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time

_PREFIX = re.compile(r"\((?P<name>[^()]*?) pid=(?P<pid>\d+)\) ")
_HAS_NUMBER = re.compile(r"\d|0x[0-9a-fA-F]")
_HINT = (" (rayreact deduplicates worker output as Ray does: set RAY_DEDUP_LOGS=0 to see every line, "
         "RAY_DEDUP_LOGS_AGG_WINDOW_S to change the window)")
_NEVER_DEDUP_TOKEN = "__ray_testing_never_deduplicate__"   # Ray's default allow pattern (its own tests use it)


def pattern_of(text: str) -> str:
    """What makes two lines "the same": their words without digits."""
    return " ".join(word for word in text.split() if not _HAS_NUMBER.search(word))


class _Seen:
    __slots__ = ("since", "held", "latest", "sources")

    def __init__(self, since, latest, source):
        self.since = since          # start of the aggregation window
        self.held = 0               # occurrences held back in this window
        self.latest = latest        # the last occurrence, whole (prefix and text)
        self.sources = {source}


class Deduplicator:
    """Decides which lines to show now and which to summarise later.  Plain logic on a clock: no I/O."""

    def __init__(self, window_s=5.0, allow=None, skip=None, clock=time.monotonic):
        self.window_s = window_s
        self._allow = re.compile(allow) if allow else None
        self._skip = re.compile(skip) if skip else None
        self._clock = clock
        self._seen = {}             # pattern -> _Seen, oldest window first
        self._hinted = False

    @classmethod
    def from_environment(cls):
        """Ray's settings, or None when ``RAY_DEDUP_LOGS`` turns deduplication off."""
        if os.environ.get("RAY_DEDUP_LOGS", "1").strip().lower() in ("0", "false", "no", "off"):
            return None
        return cls(float(os.environ.get("RAY_DEDUP_LOGS_AGG_WINDOW_S", 5)),
                   os.environ.get("RAY_DEDUP_LOGS_ALLOW_REGEX", _NEVER_DEDUP_TOKEN),
                   os.environ.get("RAY_DEDUP_LOGS_SKIP_REGEX"))

    def admit(self, line: str) -> list:
        """Lines to show now for one line (without its newline) that arrived."""
        out = self.expire()
        match = _PREFIX.match(line)
        if match is None:
            out.append(line)
            return out
        text = line[match.end():]
        if self._allow is not None and self._allow.search(text):
            out.append(line)
            return out
        if self._skip is not None and self._skip.search(text):
            return out
        key = pattern_of(text)
        if not key:
            out.append(line)          # nothing left to compare: show it
            return out
        source = match.group("pid")
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = _Seen(self._clock(), line, source)
            out.append(line)
            return out
        seen.sources.add(source)
        if len(seen.sources) == 1:
            out.append(line)          # one worker repeating itself: every line is its own news
            return out
        seen.held += 1
        seen.latest = line
        return out

    def expire(self) -> list:
        """Summaries of the windows that have ended."""
        out = []
        now = self._clock()
        while self._seen:
            key, seen = next(iter(self._seen.items()))
            if now - seen.since < self.window_s:
                break
            del self._seen[key]
            if seen.held > 1:
                out.append(self._summary(seen))
                seen.since, seen.held = now, 0
                self._seen[key] = seen             # keep aggregating, in a fresh window (now the newest)
            elif seen.held == 1:
                out.append(seen.latest)           # one repeat is shown as itself; the pattern is dropped
        return out

    def next_deadline(self):
        """When ``expire`` next has something to do (a ``clock()`` time), or None."""
        for seen in self._seen.values():
            return seen.since + self.window_s
        return None

    def flush(self) -> list:
        """Everything still held back (the session ends)."""
        out = [self._summary(s) if s.held > 1 else s.latest for s in self._seen.values() if s.held]
        self._seen.clear()
        return out

    def _summary(self, seen):
        hint = "" if self._hinted else _HINT
        self._hinted = True
        return f"{seen.latest} [repeated {seen.held}x across cluster]{hint}"


class LogForwarder:
    """The session's two log pipes and the thread that copies them to the driver's fds 1 and 2.

    ``writers()`` are the ends each zygote is started with (its workers inherit them as fds 1 and 2);
    ``close()`` at shutdown, once the zygote is gone, lets the thread drain what the workers wrote and end.
    """

    def __init__(self, deduplicate=True):
        self._pipes = [os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)]   # (read, write) for stdout, stderr
        self._dedup = [Deduplicator.from_environment() if deduplicate else None for _ in range(2)]
        self._thread = threading.Thread(target=self._run, name="rayreact-logs", daemon=True)
        self._thread.start()

    def writers(self):
        return self._pipes[0][1], self._pipes[1][1]

    def close(self, timeout=2.0):
        for _, w in self._pipes:
            try:
                os.close(w)
            except OSError:
                pass
        self._thread.join(timeout)

    def _run(self):
        reading = {self._pipes[0][0]: 0, self._pipes[1][0]: 1}
        partial = {0: b"", 1: b""}
        poller = select.poll()
        for fd in reading:
            poller.register(fd, select.POLLIN)
        try:
            while reading:
                wait_ms = self._wait_ms()
                for fd, _ in poller.poll(wait_ms):
                    stream = reading.get(fd)
                    if stream is None:
                        continue
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        poller.unregister(fd)
                        del reading[fd]
                        os.close(fd)
                        if partial[stream]:
                            self._emit(stream, [partial[stream].decode("utf-8", "replace")])
                        continue
                    data = partial[stream] + chunk
                    *lines, partial[stream] = data.split(b"\n")
                    if lines:
                        self._emit(stream, [line.decode("utf-8", "replace") for line in lines])
                for stream, dedup in enumerate(self._dedup):
                    if dedup is not None:
                        self._write(stream, dedup.expire())
        finally:
            for stream, dedup in enumerate(self._dedup):
                if dedup is not None:
                    self._write(stream, dedup.flush())

    def _wait_ms(self):
        deadlines = [d.next_deadline() for d in self._dedup if d is not None]
        deadlines = [d for d in deadlines if d is not None]
        if not deadlines:
            return None
        return max(0, int((min(deadlines) - time.monotonic()) * 1000) + 1)

    def _emit(self, stream, lines):
        dedup = self._dedup[stream]
        if dedup is None:
            self._write(stream, lines)
            return
        out = []
        for line in lines:
            out.extend(dedup.admit(line))
        self._write(stream, out)

    @staticmethod
    def _write(stream, lines):
        if not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8", "replace")
        fd = 1 + stream
        while data:
            try:
                n = os.write(fd, data)
            except OSError:
                return                # the driver's terminal went away: nothing to show it on
            data = data[n:]
