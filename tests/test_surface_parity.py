"""Every public name of Ray 2.60's core modules exists in rayreact, or is out of scope with its reason.

Generated from Ray itself: each module's ``__all__``, or else the names defined in it (imports and
type variables are not its API).  The out-of-scope list is rayreact.compat.out_of_scope.
"""

import importlib
import pkgutil
import typing

import pytest
import ray
import ray.util

from rayreact.compat import out_of_scope

CORE = ["ray", "ray.actor", "ray.remote_function", "ray.runtime_context", "ray.exceptions", "ray.job_config",
        "ray.runtime_env", "ray.autoscaler.sdk", "ray.cloudpickle", "ray.util"]
UTIL = sorted(f"ray.util.{m.name}" for m in pkgutil.iter_modules(ray.util.__path__) if not m.name.startswith("_"))


def ray_module(name):
    """Ray's module, or None where Ray itself cannot import it here (removed, or its library missing)."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - Ray raises ImportError, DeprecationWarning-errors and more here
        return None


def public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items()
                 if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    return [n for n in names if not isinstance(_peek(module, n), typing.TypeVar)]


def _peek(module, name):
    try:
        return getattr(module, name, None)
    except (ImportError, RuntimeError):   # a lazily imported library of Ray's: not installed (ray.data needs
        return None                      # pandas) or removed (ray.workflow raises)


def ours(name):
    return "rayreact" + name[len("ray"):]


@pytest.mark.parametrize("name", CORE + UTIL)
def test_every_public_name_exists_or_is_out_of_scope(name):
    theirs = ray_module(name)
    if theirs is None:
        assert name not in CORE, f"Ray's core module {name} failed to import"
        return
    if name in out_of_scope.MODULES:
        with pytest.raises(ImportError):
            importlib.import_module(ours(name))
        return
    mine = importlib.import_module(ours(name))
    missing = [n for n in public_names(theirs)
               if not hasattr(mine, n) and (name, n) not in out_of_scope.NAMES]
    assert not missing, f"{ours(name)} lacks {missing} (add them, or say why in rayreact.compat.out_of_scope)"


def test_the_out_of_scope_list_names_only_what_is_missing():
    for (module, name), reason in out_of_scope.NAMES.items():
        assert reason
        theirs = ray_module(module)
        assert theirs is not None and name in public_names(theirs), f"{module}.{name} is not Ray's public API"
        try:
            mine = importlib.import_module(ours(module))
        except ImportError:
            continue
        assert not hasattr(mine, name), f"{ours(module)}.{name} exists: drop it from the out-of-scope list"
    for module, reason in out_of_scope.MODULES.items():
        assert reason and module.startswith("ray.util.")


def test_runtime_env_types_are_dicts_that_init_accepts(backend_module):
    ray_ = backend_module
    env = ray_.runtime_env.RuntimeEnv(env_vars={"SURFACE_PARITY": "yes"},
                                      config=ray_.runtime_env.RuntimeEnvConfig(setup_timeout_seconds=60))
    assert isinstance(env, dict) and env["env_vars"] == {"SURFACE_PARITY": "yes"}
    assert env["config"]["setup_timeout_seconds"] == 60
    with pytest.raises(TypeError):
        ray_.runtime_env.RuntimeEnv(env_vars={"A": 1})
    with pytest.raises(ValueError):
        ray_.runtime_env.RuntimeEnvConfig(setup_timeout_seconds=0)
    ray_.init(num_cpus=1, include_dashboard=False, runtime_env=env)
    try:
        read = ray_.remote(lambda: __import__("os").environ.get("SURFACE_PARITY"))
        assert ray_.get(read.remote(), timeout=120) == "yes"
    finally:
        ray_.shutdown()


def test_star_import_gives_every_name_of_all():
    # Ray's own `from ray import *` fails where pandas is missing (ray.data); rayreact's must always work.
    namespace = {}
    exec("from rayreact import *", namespace)
    import rayreact
    assert set(rayreact.__all__) <= set(namespace)
