"""rayreact's real-Ray side: traces of executed calls, a tracing wrapper for real Ray,
trace comparison (``rayreact compare``), the ``ray`` module alias, and delegation of
every call to a real Ray cluster when ``init(address=...)`` asks for one."""
