"""Ray's answers kept for reuse within one test run: what a script printed under real Ray, and its exit status.

::

    rayreact compare script.py args ──ray run 1──▶ RAYREACT_RAY_ANSWERS/<key>.json ──▶ a test that only
                                                    key: the script's bytes, its        needs Ray's answer
                                                    arguments, Ray's and Python's       (a deterministic
                                                    versions                            script's checksum)

Starting real Ray is most of what a short script costs under it, and a test suite asks Ray for the answer
to the same fixed script more than once.  ``rayreact compare`` writes its first Ray run here when
``RAYREACT_RAY_ANSWERS`` names a directory (CI makes a fresh private one per run; answers are never
committed), and such a test reads it instead of starting Ray again.  Unset, nothing is written or read.
The key leaves out what a test run keeps fixed (the hash seed compare sets, modules the script imports):
a directory of answers is meant for one run of the suite, not to be kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

ENV_VAR = "RAYREACT_RAY_ANSWERS"


def directory():
    """The answers' directory, or None when reuse is off."""
    return os.environ.get(ENV_VAR) or None


def key(script, args) -> str:
    """What makes two runs the same question: the script's bytes, its arguments, Ray's and Python's versions."""
    from importlib import metadata

    try:
        ray_version = metadata.version("ray")
    except metadata.PackageNotFoundError:
        ray_version = "none"
    digest = hashlib.sha256()
    with open(script, "rb") as f:
        digest.update(f.read())
    digest.update(json.dumps([list(args), ray_version, sys.version]).encode())
    return digest.hexdigest()


def store(folder, script, args, stdout, exit_code):
    """Keep one Ray run's answer (written to a private temporary file, then renamed into place)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".answer-")
    with os.fdopen(fd, "w") as f:
        json.dump({"script": os.path.basename(script), "args": list(args), "stdout": stdout,
                   "exit_code": exit_code}, f)
    os.replace(tmp, os.path.join(folder, key(script, args) + ".json"))


def load(folder, script, args):
    """The answer kept for this script and these arguments: {"stdout", "exit_code", ...}, or None."""
    try:
        fd = os.open(os.path.join(folder, key(script, args) + ".json"), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd) as f:
        return json.load(f)
