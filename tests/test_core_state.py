"""The core keeps no state between calls: no module of ``app/core`` holds a mutable value.

What a prepare may reuse from an earlier one is handed to it (``prepare(extends=...)``, kept by
the session's context in the services layer), so the core's result depends on its arguments
alone. A module-level name is allowed when it cannot change: a ``Final`` constant, ``__all__``,
or a value of an immutable kind (a frozenset, a tuple, a string, a compiled pattern, a frozen
dataclass, a read-only mapping, a class or function). Everything else — a dict, a list, a set,
an instance of an ordinary class — is state some caller could fill.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import operator
import re
import struct
import types
import typing
from pathlib import Path
from typing import Any

CORE = Path(__file__).resolve().parents[1] / "app" / "core"

IMMUTABLE = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    frozenset,
    tuple,
    range,
    re.Pattern,
    struct.Struct,
    types.MappingProxyType,
    operator.itemgetter,
    operator.attrgetter,
    typing.TypeVar,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.UnionType,
)


def _final(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "Final"


def _assigned(tree: ast.Module) -> list[tuple[str, int]]:
    """The module-level names assigned a value, other than ``Final`` ones and ``__all__``."""
    names: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            if _final(node.annotation) or not isinstance(node.target, ast.Name):
                continue
            names.append((node.target.id, node.lineno))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id != "__all__":
                    names.append((target.id, node.lineno))
    return names


def _immutable(value: Any) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_immutable(v) for v in value)
    if isinstance(value, IMMUTABLE):
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return bool(type(value).__dataclass_params__.frozen)  # type: ignore[attr-defined]
    # Type aliases and other typing constructs (``X = tuple[int, str]``, ``Literal[...]``).
    return isinstance(value, types.GenericAlias) or type(value).__module__ == "typing"


def test_no_module_of_the_core_holds_mutable_state() -> None:
    found: list[str] = []
    for path in sorted(CORE.rglob("*.py")):
        module_name = ".".join(path.relative_to(CORE.parents[1]).with_suffix("").parts)
        module_name = module_name.removesuffix(".__init__")
        names = _assigned(ast.parse(path.read_text()))
        if not names:
            continue
        module = importlib.import_module(module_name)
        for name, line in names:
            value = getattr(module, name)
            if not _immutable(value):
                found.append(f"{module_name}:{line} {name} ({type(value).__name__})")
    assert not found, "module-level mutable values in app/core:\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for() -> None:
    # What the rule refuses, and what it lets through.
    assert not _immutable({})
    assert not _immutable([1])
    assert not _immutable({1})
    assert not _immutable(object())
    assert not _immutable((1, []))  # a tuple holding a list can change
    assert _immutable((1, "a", frozenset({2})))
    assert _immutable(re.compile("a"))
    assert _immutable(types.MappingProxyType({}))
    tree = ast.parse("A: Final = {}\nB = {}\n__all__ = ['B']\nC: dict[str, int] = {}\n")
    assert [name for name, _ in _assigned(tree)] == ["B", "C"]
