"""Which runtime serves API calls in this process (driver, worker, local mode, or real Ray)."""

current = None  # set by init() in the driver, by the worker main loop in workers


def get():
    return current
