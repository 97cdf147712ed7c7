"""``log_once`` and its switches (``ray.util.debug``): log a message once per key per process."""

from __future__ import annotations

import time
from typing import Optional

_PERIOD_S = 60.0

_logged = set()
_disabled = False
_periodic = False
_last_logged = 0.0


def log_once(key: str) -> bool:
    """True the first time ``key`` is seen in this process (again every minute if periodic logging is on)."""
    global _last_logged
    if _disabled:
        return False
    if key not in _logged:
        _logged.add(key)
        _last_logged = time.time()
        return True
    if _periodic and time.time() - _last_logged > _PERIOD_S:
        # Forget every key, so each logs once more in the next period.
        _logged.clear()
        _last_logged = time.time()
    return False


def disable_log_once_globally() -> None:
    """Make ``log_once`` return False in this process."""
    global _disabled
    _disabled = True


def enable_periodic_logging() -> None:
    """Make ``log_once`` return True again for each key about once a minute."""
    global _periodic
    _periodic = True


def reset_log_once(key: Optional[str] = None) -> None:
    """Forget ``key`` (or every key) so it logs once more."""
    if key is None:
        _logged.clear()
    else:
        _logged.discard(key)
