"""The runtime protocol (core.runtime_api.RuntimeAPI): each runtime implements all of it, and the facade
calls nothing else.

Pure inspection: no runtime is started here.
"""

import ast
import inspect
import os

import pytest

from rayreact.compat.delegate import RayDelegate
from rayreact.core import runtime_api
from rayreact.core.local_mode import LocalRuntime
from rayreact.core.replay import Reactor
from rayreact.core.runtime import Runtime
from rayreact.core.worker import Worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIMES = [Runtime, Worker, LocalRuntime, RayDelegate, Reactor]
# What the reactor in front of the driver's runtime serves itself (the rest it passes on: RuntimeFront).
REACTOR_SERVED = ("submit_task", "submit_actor_call", "put", "get_values", "wait_ids", "create_actor",
                  "kill_actor", "cancel", "timeline_events", "shutdown")


def _params(fn):
    return list(inspect.signature(fn).parameters.values())[1:]     # without self


def incompatibilities(impl, proto):
    """Why ``impl`` cannot stand in for the protocol method ``proto`` (empty: it can).

    Compatible: the protocol's parameters, in order, with the same names and kinds; a parameter with a
    default in the protocol has the same default; the implementation may add parameters only with defaults.
    """
    want, have = _params(proto), _params(impl)
    problems = []
    for i, p in enumerate(want):
        if i >= len(have):
            problems.append(f"missing parameter {p.name!r}")
            continue
        q = have[i]
        if q.name != p.name:
            problems.append(f"parameter {i} is {q.name!r}, the protocol's is {p.name!r}")
        elif q.kind != p.kind:
            problems.append(f"parameter {p.name!r} is {q.kind.description}, the protocol's {p.kind.description}")
        elif p.default is not p.empty and q.default != p.default:
            problems.append(f"parameter {p.name!r} defaults to {q.default!r}, the protocol's to {p.default!r}")
    for q in have[len(want):]:
        if q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            continue
        if q.default is q.empty:
            problems.append(f"extra parameter {q.name!r} has no default")
    return problems


def test_the_protocol_lists_what_the_facade_needs():
    expected = {
        "submit_task", "submit_actor_call", "create_actor", "put", "get_values", "wait_ids", "external_id",
        "on_ref_unpickled", "stream_next", "stream_drop", "kill_actor", "cancel", "named_actor",
        "list_named_actors", "resources", "nodes", "placement_group_call", "get_gpu_ids", "runtime_info",
        "runtime_context", "current_actor_handle", "current_call_cancelled", "request_actor_exit",
        "timeline_events", "address_info", "finish_submitted", "shutdown",
    }
    assert set(runtime_api.PROTOCOL_METHODS) == expected
    for name in runtime_api.PROTOCOL_METHODS:
        assert getattr(runtime_api.RuntimeAPI, name).__doc__, f"{name} says what it returns"


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", runtime_api.PROTOCOL_METHODS)
def test_runtime_implements_the_method(runtime, name):
    impl = inspect.getattr_static(runtime, name, None)
    assert impl is not None, f"{runtime.__name__} lacks {name}"
    impl = getattr(runtime, name)
    assert inspect.isfunction(impl), f"{runtime.__name__}.{name} is not a method"
    assert incompatibilities(impl, getattr(runtime_api.RuntimeAPI, name)) == []


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda c: c.__name__)
def test_runtime_declares_the_attributes(runtime):
    for name in runtime_api.PROTOCOL_ATTRIBUTES:
        assert isinstance(getattr(runtime, name), bool)
    assert Worker.is_driver is False and Runtime.is_driver is True and LocalRuntime.is_driver is True


@pytest.mark.parametrize("name", REACTOR_SERVED)
def test_the_reactor_serves_the_calls_it_replays_itself(name):
    # By composition: its own methods, not RuntimeFront's pass-through (nothing is set on an instance).
    assert name in runtime_api.PROTOCOL_METHODS
    assert name in vars(Reactor), f"Reactor.{name} passes on what it must serve"
    assert incompatibilities(getattr(Reactor, name), getattr(runtime_api.RuntimeAPI, name)) == []


def test_nothing_is_set_on_the_dynamic_runtime_instance():
    import rayreact
    rayreact.init(num_cpus=1)
    try:
        front = rayreact.core.context.current
        assert isinstance(front, Reactor)
        behind = front.behind
        assert type(behind) is Runtime
        assert not set(runtime_api.PROTOCOL_METHODS) & set(vars(behind)), "a protocol method set on the instance"
    finally:
        rayreact.shutdown()


def test_the_check_catches_missing_and_different_parameters():
    class Proto:
        def f(self, a, b, peek=False):
            """doc"""

    def fine(self, a, b, peek=False, extra=None): pass
    def missing(self, a): pass
    def renamed(self, a, c, peek=False): pass
    def no_default(self, a, b, peek): pass
    def keyword_only(self, a, *, b, peek=False): pass
    def extra_required(self, a, b, peek=False, more=1, needed=None, *, must): pass

    assert incompatibilities(fine, Proto.f) == []
    for bad in (missing, renamed, no_default, keyword_only, extra_required):
        assert incompatibilities(bad, Proto.f), bad.__name__


def test_the_protocol_module_imports_nothing_above_core():
    tree = ast.parse(open(runtime_api.__file__).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module.partition(".")[0] != "rayreact", node.module
        elif isinstance(node, ast.Import):
            assert all(a.name.partition(".")[0] != "rayreact" for a in node.names)


FACADE = ["rayreact/_api.py", "rayreact/actor.py", "rayreact/remote_function.py", "rayreact/object_ref.py",
          "rayreact/runtime_context.py"] + [
    os.path.join("rayreact/util", f) for f in sorted(os.listdir(os.path.join(ROOT, "rayreact/util")))
    if f.endswith(".py") and f != "_pg_accounting.py"]   # the ledger is the scheduler's, run inside core


def _runtime_expression(node):
    """``rt``, ``self._rt``, ``context.current``, ``_runtime()``: what names the runtime in the facade."""
    if isinstance(node, ast.Name):
        return node.id in ("rt", "runtime", "_runtime")
    if isinstance(node, ast.Attribute):
        return node.attr in ("_rt", "current", "runtime", "_runtime")
    if isinstance(node, ast.Call):
        return _runtime_expression(node.func)
    return False


@pytest.mark.parametrize("path", FACADE)
def test_the_facade_does_not_probe_the_runtime(path):
    source = open(os.path.join(ROOT, path)).read()
    assert "_delegate" not in source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            assert not (node.args and _runtime_expression(node.args[0])), \
                f"{path}:{node.lineno}: {node.func.id} on the runtime"


def test_the_facade_objects_core_reads_declare_what_it_reads():
    import rayreact

    def f(x):
        return x

    class C:
        async def g(self):
            return 1

    fn = rayreact.remote(f)
    cls = rayreact.remote(C)
    assert isinstance(fn, runtime_api.RemoteFunctionInterface)
    assert isinstance(cls, runtime_api.ActorClassInterface)
    assert fn._function is f and fn._function_name.endswith("f") and cls._is_async
    # Core reads no other underscored name of them (the source scan below names every one it reads).
    declared = set(runtime_api.RemoteFunctionInterface.__annotations__) | \
        set(runtime_api.ActorClassInterface.__annotations__) | {"_replay_key"}
    core = os.path.join(ROOT, "rayreact", "core")
    for name in os.listdir(core):
        if not name.endswith((".py", ".pyx")):
            continue
        with open(os.path.join(core, name)) as source:
            text = source.read()
        for var in ("remote_function", "actor_class", "fn", "function", "obj"):
            for attr in set(__import__("re").findall(rf"\b{var}\._([a-z][a-z_]*)", text)):
                assert "_" + attr in declared, f"core/{name} reads {var}._{attr}, which no interface declares"
