"""Session files outlive a session only if every process of it was killed at once; the next ``init`` sweeps them.

Every session's shared files are named ``rr-<session>-*`` in its own private
directory (``/dev/shm/rr-<session>/``, see core.session_dir).  A session first creates ``rr-<session>-lock`` and holds a shared
``flock`` on it for as long as any of its processes lives: the driver opens it,
the zygote inherits the descriptor, workers inherit it from the zygote.  The
kernel drops the lock when the last of them dies, however it dies.  So a
session whose lock can be taken exclusively is dead, and its files can go.

The lock file appears atomically (made and locked under a hidden name, then
renamed), so a sweeper never sees a live session's lock unheld.  Files of a
session with no lock file come from a rayreact that predates it: they are
removed only when they are ours, no process maps any of them and none changed
for a while.
"""

from __future__ import annotations

import collections
import fcntl
import glob
import os
import re
import stat
import tempfile
import time

LOCK_SUFFIX = "-lock"
LEGACY_QUIET_SECONDS = 60.0
_SESSION = re.compile(r"^rr-([0-9a-f]{8})-")
_SESSION_DIR = re.compile(r"^rr-[0-9a-f]{8}$")
_HIDDEN_LOCK = re.compile(r"^\.rr-[0-9a-f]{8}-lock\.([0-9]+)$")   # a lock being made by process <pid>


def lock_path(shm_dir: str, session: str) -> str:
    return os.path.join(shm_dir, f"rr-{session}{LOCK_SUFFIX}")


def hold_session_lock(shm_dir: str, session: str) -> int:
    """Create the session's lock file, locked, and return its descriptor (the caller keeps it open)."""
    final = lock_path(shm_dir, session)
    hidden = os.path.join(shm_dir, f".rr-{session}{LOCK_SUFFIX}.{os.getpid()}")
    fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.rename(hidden, final)
    except BaseException:
        os.close(fd)
        _unlink(hidden)
        raise
    return fd


def remove_session_files(shm_dir: str, session: str) -> None:
    """Remove a session's files, its lock last (until then, sweepers see the session as alive)."""
    lock = lock_path(shm_dir, session)
    for path in glob.glob(os.path.join(glob.escape(shm_dir), f"rr-{session}-*")):
        if path != lock:
            _unlink(path)
    _unlink(lock)


def shared_dirs() -> list:
    """Where sessions keep files: /dev/shm, and private fallback directories in the temp dir."""
    dirs = ["/dev/shm"] if os.path.isdir("/dev/shm") else []
    return dirs + sorted(glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), "rayreact-shm-*")))


def sweep(dirs=None) -> list:
    """Remove the files of dead sessions in ``dirs``; returns the sessions removed.  Never raises."""
    removed = []
    legacy = []
    for d in shared_dirs() if dirs is None else dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        sessions = collections.defaultdict(list)
        for name in names:
            m = _SESSION.match(name)
            if m:
                sessions[m.group(1)].append(name)
            elif _SESSION_DIR.match(name):
                removed += _sweep_session_dir(os.path.join(d, name))
            elif (h := _HIDDEN_LOCK.match(name)) and not os.path.exists(f"/proc/{h.group(1)}"):
                _unlink(os.path.join(d, name))
        for session, files in sessions.items():
            if f"rr-{session}{LOCK_SUFFIX}" in files:
                if _is_dead(lock_path(d, session)):
                    remove_session_files(d, session)
                    removed.append(session)
            else:
                legacy.append((d, session, files))
        if d != "/dev/shm":
            _remove_if_abandoned(d)
    if legacy:
        removed += _sweep_legacy(legacy)
    return removed


def _sweep_session_dir(path):
    """A session's private directory: its files go if the session is dead, and then the directory."""
    try:
        st = os.lstat(path)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return []          # not ours (and a link is never followed)
    removed = sweep([path])
    if removed:
        try:
            os.rmdir(path)
        except OSError:
            pass
    return removed


def _is_dead(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)     # closing drops our lock, if we got it


def _sweep_legacy(candidates) -> list:
    now = time.time()
    quiet = []
    me = os.geteuid()
    for d, session, files in candidates:
        try:
            stats = [os.lstat(os.path.join(d, f)) for f in files]
        except OSError:
            continue
        if all(st.st_uid == me for st in stats) and now - max(st.st_mtime for st in stats) > LEGACY_QUIET_SECONDS:
            quiet.append((d, session))
    if not quiet:
        return []
    mapped = _sessions_mapped_by_live_processes()
    removed = []
    for d, session in quiet:
        if session not in mapped:
            remove_session_files(d, session)
            removed.append(session)
    return removed


def _sessions_mapped_by_live_processes():
    """Sessions some process maps a file of.  Processes whose maps we may not read are another user's (or
    the container's init): their sessions' files are not ours, and only our own files are ever removed."""
    found = set()
    pattern = re.compile(r"/rr-([0-9a-f]{8})-")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                text = f.read()
        except OSError:
            continue          # it exited meanwhile, or it is not ours to read
        found.update(pattern.findall(text))
    return found


def _remove_if_abandoned(d):
    """A fallback directory left empty by the sweep (and not brand new, i.e. no session is starting in it)."""
    try:
        if not os.listdir(d) and time.time() - os.stat(d).st_mtime > LEGACY_QUIET_SECONDS:
            os.rmdir(d)
    except OSError:
        pass


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
