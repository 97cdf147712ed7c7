"""Where a session keeps its shared files, out of every other user's reach.

``/dev/shm`` and the temp dir are writable by everyone.  A file created there at a name someone can
predict can be pre-empted (the session then fails), redirected (a planted symlink makes the session
write wherever it points) or read.  So no session file lives there directly: each session first
makes its own directory, and every name a session uses is inside it::

    /dev/shm/rr-<session>/              mode 0700, made by mkdir (exclusive, never follows a link)
        rr-<session>-lock               held while any process of the session lives (core.leftovers)
        rr-<session>-zygote, -w3-in ... rings, doorbells, segments, the reactor's timelines
    $TMPDIR/rayreact-shm-XXXXXXXX/      the same, when /dev/shm has no room (mkdtemp: 0700, exclusive)
    $TMPDIR/rayreact-shm-XXXXXXXX/      another: values spilled past object_store_memory (core.spilling)

The directory's name is visible to all, but nobody else can list it, create in it, or rename
anything inside it, so the names within need not be secret.  ``mkdir`` fails on anything already at
the name, a symlink included; the session then draws another id.  The new directory is checked to be
a real directory owned by us (never a link) before anything is put in it.
"""

from __future__ import annotations

import os
import stat
import tempfile

PRIVATE_DIR_PREFIX = "rayreact-shm-"     # private directories in the temp dir (core.leftovers sweeps them)
_ATTEMPTS = 64


class SharedDirs:
    """A session's id and its directories: ``shm`` for shared memory, ``spill`` (or None) for spilling."""

    __slots__ = ("session", "shm", "spill", "in_memory", "warning")

    def __init__(self, session, shm, spill, in_memory, warning):
        self.session = session
        self.shm = shm
        self.spill = spill
        self.in_memory = in_memory     # shm is in /dev/shm (memory), not in the temp dir (page cache)
        self.warning = warning


def random_session_id() -> str:
    return os.urandom(4).hex()


def create(store_bytes: int, root: str = "/dev/shm", draw_id=random_session_id) -> SharedDirs:
    """Make a new session's private directories: in ``root`` when it has room for ``store_bytes``,
    else in the temp dir (with a warning saying why).  ``draw_id()`` gives candidate session ids."""
    want = max(store_bytes or 0, 256 * 1024 * 1024)
    try:
        st = os.statvfs(root)
        free = st.f_bavail * st.f_frsize
        if free >= want and os.access(root, os.W_OK):
            session, shm = _make_session_dir(root, draw_id)
            return SharedDirs(session, shm, private_temp_dir(), True, None)
        warning = (f"{root} has only {free // (1024 * 1024)} MiB free (need {want // (1024 * 1024)} MiB); "
                   "rayreact falls back to a directory in the temp dir for shared objects, which is slower. "
                   "Give the container more shared memory (e.g. docker --shm-size=2g).")
    except OSError:
        warning = f"{root} is not available; rayreact uses a directory in the temp dir for shared objects."
    return SharedDirs(draw_id(), private_temp_dir(), None, False, warning)


def private_temp_dir() -> str:
    """A new 0700 directory in the temp dir (mkdtemp creates it exclusively at an unguessable name)."""
    return tempfile.mkdtemp(prefix=PRIVATE_DIR_PREFIX)


def session_dir_name(session: str) -> str:
    return f"rr-{session}"


def _make_session_dir(root, draw_id):
    for _ in range(_ATTEMPTS):
        session = draw_id()
        path = os.path.join(root, session_dir_name(session))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue            # someone's session, or something planted: draw another id
        _check_private(path)
        return session, path
    raise RuntimeError(f"rayreact could not create a private session directory in {root}: "
                       f"{_ATTEMPTS} random names were all taken")


def _check_private(path):
    """The directory we just made is ours, a directory, and 0700 (whatever the umask)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise RuntimeError(f"rayreact's session directory {path} is not a directory of this user")
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
