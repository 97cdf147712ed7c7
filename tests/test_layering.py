"""The layering rule, read from the source: lower layers never import higher ones.

Every import statement counts, function-level ones included (a lazy import is still a dependency).  From
the bottom up:

    transport      channels and the wire: rings, doorbells, ids, message kinds
    object plane   values: serialization, segments, snapshots, spilling, the arena
    engine         the rest of rayreact.core: runtime, workers, local mode, the reactor, trace
    facade         rayreact.* outside core (the public API, util, compat, the CLI)

``rayreact.exceptions`` sits beside the transport: every layer may raise Ray's exception types.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "rayreact"

TRANSPORT = {"rayreact.core.libc", "rayreact.core.ids", "rayreact.core.channel", "rayreact.core.wire",
             "rayreact.core.proctitle", "rayreact.core.leftovers", "rayreact.exceptions"}
OBJECT_PLANE = {f"rayreact.core.{name}" for name in (
    "serialization", "classify", "plain_pickle", "tensor_pickle", "segments", "snapshots", "write_watch",
    "spilling", "arena", "handoff", "refcount", "generator_returns")}
ENGINE_PREFIX = "rayreact.core"


def layer_of(module):
    if module in TRANSPORT:
        return 0
    if module in OBJECT_PLANE:
        return 1
    if module == ENGINE_PREFIX or module.startswith(ENGINE_PREFIX + "."):
        return 2
    return 3


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+c?import\s+([\w, ]+)|c?import\s+([\w.]+))", re.M)


def imports_of(path):
    """(line, absolute module) for every import in ``path``; ``from pkg import name`` counts pkg.name when
    that is a module of ours, else pkg."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []

    def absolute(level, target):
        if not level:
            return target
        base = package.split(".")
        base = base[:len(base) - (level - 1)]
        return ".".join(base + ([target] if target else []))

    def add(line, level, target, names):
        base = absolute(level, target)
        subs = [f"{base}.{n}" for n in names if _is_module(f"{base}.{n}")]
        found.extend((line, m) for m in (subs or [base]))

    if path.suffix == ".py":
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                add(node.lineno, node.level, node.module or "", [a.name for a in node.names])
    else:
        text = path.read_text()
        for match in _PYX_IMPORT.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if match.group(3):
                found.append((line, match.group(3)))
            else:
                dots = len(match.group(1)) - len(match.group(1).lstrip("."))
                names = [n.strip().split(" ")[0] for n in match.group(2).split(",") if n.strip()]
                add(line, dots, match.group(1).lstrip("."), names)
    return [(line, m) for line, m in found if m == "rayreact" or m.startswith("rayreact.")]


def _is_module(name):
    relative = pathlib.Path(*name.split(".")[1:])
    base = PACKAGE.joinpath(relative)
    return base.is_dir() or any(base.with_suffix(s).exists() for s in (".py", ".pyx"))


SOURCES = sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyx"))


def upward_imports():
    found = []
    for path in SOURCES:
        here = module_name(path)
        for line, target in imports_of(path):
            if target == "rayreact":
                target = "rayreact.__init__"
            if layer_of(target) > layer_of(here):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {here} imports {target}")
    return found


def test_no_layer_imports_a_higher_one():
    assert upward_imports() == []


def test_the_reader_sees_function_level_and_cython_imports(tmp_path, monkeypatch):
    # The check must not pass by missing imports: plant each kind in a fake package and see it reported.
    fake = tmp_path / "rayreact"
    (fake / "core").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "actor.py").write_text("")
    (fake / "core" / "__init__.py").write_text("")
    (fake / "core" / "serialization.py").write_text("def f():\n    from .. import actor\n")
    (fake / "core" / "channel.pyx").write_text("from .serialization import loads\ncimport rayreact.core.runtime\n")
    (fake / "core" / "runtime.py").write_text("import rayreact.actor as a\n")
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "PACKAGE", fake)
    monkeypatch.setattr(this, "SOURCES", sorted(p for p in fake.rglob("*") if p.suffix in (".py", ".pyx")))
    found = upward_imports()
    assert any("serialization.py:2:" in f and f.endswith("rayreact.actor") for f in found), found
    assert any("channel.pyx:1:" in f and f.endswith("rayreact.core.serialization") for f in found), found
    assert any("channel.pyx:2:" in f and f.endswith("rayreact.core.runtime") for f in found), found
    assert any("runtime.py:1:" in f and f.endswith("rayreact.actor") for f in found), found
    assert len(found) == 4, found
