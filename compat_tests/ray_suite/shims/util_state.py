"""``ray.util.state``: Ray's state API (reads the GCS); imported by test files, used by none of
the tests that run against rayreact."""
