"""Make ``import ray`` (and ``import ray.<anything>``) give rayreact.

``rayreact run script.py`` and the Ray test-suite plugin call :func:`install`
before any user code runs.  ``sys.modules['ray']`` becomes the rayreact package,
and a meta-path finder answers every ``ray.X.Y`` import with the module
``rayreact.X.Y`` (the *same* module object, so ``ray.exceptions.RayTaskError is
rayreact.exceptions.RayTaskError``), or with a module from ``overrides``.  A
``ray.X`` that rayreact does not have fails to import, as it would for a module
missing from Ray.  An override ``"dir:<path>"`` makes the name a package of the
modules in that directory.

Worker processes must see the same ``ray``: :func:`install` records the alias in
the environment (``RAYREACT_RAY_ALIAS``), and rayreact's worker start-up calls
:func:`install_from_env` before it unpickles any user code (helpers of the
user's that ``import ray`` are pickled by reference and re-imported there).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

from rayreact.core.zygote import SETUP_HOOKS_VAR

ENV_VAR = "RAYREACT_RAY_ALIAS"        # the overrides, as JSON
ENV_FLAG = "RAYREACT_ALIAS_RAY"       # "1": workers install the alias
_SETUP_HOOK = "rayreact.compat.alias:install_from_env"

# Ray modules served by something other than rayreact.<same path>.
DEFAULT_OVERRIDES = {}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target
        self._module = None
        self._spec = None

    def create_module(self, spec):
        self._module = importlib.import_module(self._target)
        self._spec = getattr(self._module, "__spec__", None)
        return self._module

    def exec_module(self, module):
        # The import system has just stamped the alias' spec onto the real module; undo
        # that so that the module keeps its own identity (reload, pickling by name).
        if self._spec is not None:
            module.__spec__ = self._spec


class RayAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``ray`` and ``ray.*`` to rayreact's modules (or to overrides)."""

    def __init__(self, overrides=None):
        self.overrides = dict(DEFAULT_OVERRIDES)
        self.overrides.update(overrides or {})

    def target_of(self, fullname):
        if fullname in self.overrides:
            return self.overrides[fullname]
        if fullname.startswith("rayreact."):
            # `from ray import X` falls back to importing rayreact.X (the module's real name).
            return self.overrides.get("ray." + fullname[len("rayreact."):])
        if fullname == "ray":
            return "rayreact"
        if fullname.startswith("ray."):
            return "rayreact" + fullname[3:]
        return None

    def find_spec(self, fullname, path=None, target=None):
        module_name = self.target_of(fullname)
        if module_name is None:
            return None
        if module_name.startswith("dir:"):
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [module_name[4:]]
            return spec
        try:
            found = module_name in sys.modules or importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module_name),
                                               is_package=_is_package(module_name))


def _is_package(module_name):
    module = sys.modules.get(module_name)
    if module is not None:
        return hasattr(module, "__path__")
    spec = importlib.util.find_spec(module_name)
    return spec is not None and spec.submodule_search_locations is not None


_FINDER = None


def install(overrides=None):
    """Alias ``ray`` to rayreact in this process (idempotent; overrides are merged).

    Without ``overrides``, those recorded in the environment by the process that
    started this one are used, so a worker gets its driver's alias exactly.
    """
    global _FINDER
    if overrides is None and os.environ.get(ENV_VAR):
        overrides = json.loads(os.environ[ENV_VAR])
    if _FINDER is None:
        _drop_real_ray()
        _FINDER = RayAliasFinder(overrides)
        sys.meta_path.insert(0, _FINDER)
    else:
        _FINDER.overrides.update(overrides or {})
    os.environ[ENV_VAR] = json.dumps(_FINDER.overrides)
    os.environ[ENV_FLAG] = "1"
    _register_worker_setup()
    import rayreact

    sys.modules["ray"] = rayreact
    return _FINDER


def _register_worker_setup():
    """Have every worker this process starts install the alias first (see rayreact.core.zygote)."""
    hooks = [h for h in os.environ.get(SETUP_HOOKS_VAR, "").split(",") if h]
    if _SETUP_HOOK not in hooks:
        os.environ[SETUP_HOOKS_VAR] = ",".join(hooks + [_SETUP_HOOK])


def install_from_env():
    """In a worker: install the alias its driver had (no-op when the driver had none)."""
    if _FINDER is None and (os.environ.get(ENV_VAR) or os.environ.get(ENV_FLAG) == "1"):
        install()


def uninstall():
    """Remove the alias; modules already imported by user code keep what they got."""
    global _FINDER
    if _FINDER is not None:
        sys.meta_path.remove(_FINDER)
        _FINDER = None
    os.environ.pop(ENV_VAR, None)
    os.environ.pop(ENV_FLAG, None)
    hooks = [h for h in os.environ.get(SETUP_HOOKS_VAR, "").split(",") if h and h != _SETUP_HOOK]
    if hooks:
        os.environ[SETUP_HOOKS_VAR] = ",".join(hooks)
    else:
        os.environ.pop(SETUP_HOOKS_VAR, None)
    for name in [n for n in sys.modules if n == "ray" or n.startswith("ray.")]:
        module = sys.modules[name]
        if getattr(module, "__name__", "").partition(".")[0] != "ray":
            del sys.modules[name]


def installed():
    return _FINDER is not None


def _drop_real_ray():
    """Forget any real Ray already imported, so that aliasing is complete."""
    for name in [n for n in sys.modules if n == "ray" or n.startswith("ray.")]:
        del sys.modules[name]
