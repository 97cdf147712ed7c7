"""``ray._private.ray_constants`` / ``ray.ray_constants``: the names the target tests import."""

KV_NAMESPACE_FUNCTION_TABLE = b"fun"
RAY_ENABLE_AUTO_CONNECT_ENV_VAR = "RAY_ENABLE_AUTO_CONNECT"
