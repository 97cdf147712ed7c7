"""Run a Python script as ``__main__`` the way ``python script.py`` would."""

import os
import runpy
import sys


def run_script(path, args):
    """Execute ``path`` as ``__main__`` with ``sys.argv = [path, *args]``; return its exit status."""
    path = os.path.abspath(path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0
