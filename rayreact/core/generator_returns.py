"""Ray's rules for a generator that fills a fixed number of return values (``num_returns=N``).

The generator is drawn item by item into the N refs.  What it yielded before it
failed stays available; the refs it did not reach hold the error instead: the
exception it raised, or a ``ValueError`` if it stopped early.  Once all N refs
are filled, a further item or a late exception does not reach the caller: Ray
reports it on stderr (ray-project/ray#28689), and so do we.  Dynamic generators
(``num_returns="dynamic"``) keep what was yielded too, and their error becomes
one more item (see ``runtime``).
"""

import sys


def draw(generator, num_returns):
    """``(values, error)``: up to ``num_returns`` items, and the exception for the refs not reached (or None)."""
    values = []
    try:
        for item in generator:
            if len(values) == num_returns:
                generator.close()
                _unhandled(ValueError(f"Task returned more than num_returns={num_returns} objects."))
                break
            values.append(item)
    except Exception as exc:  # noqa: BLE001 - it belongs to the refs the generator did not reach
        if len(values) == num_returns:
            _unhandled(exc)
            return values, None
        return values, exc.with_traceback(exc.__traceback__.tb_next)   # from the user's frame on
    if len(values) < num_returns:
        return values, ValueError(f"Task returned {len(values)} objects, but num_returns={num_returns}.")
    return values, None


def _unhandled(exc):
    print(f"Unhandled error: Task threw exception, but all return values already created. This should only "
          f"occur when using generator tasks (see ray-project/ray#28689).\n{type(exc).__name__}: {exc}",
          file=sys.stderr)
