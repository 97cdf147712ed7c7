"""``python -m rayreact``: the ``rayreact`` command line (see :mod:`rayreact.cli`)."""

import sys

from rayreact.cli import main

sys.exit(main())
