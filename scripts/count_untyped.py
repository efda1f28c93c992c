"""Count the service functions whose signature carries free-form JSON (``dict[str, Any]``).

A service takes a typed command and returns a typed result (docs/architecture.md, "Typed
boundaries"); ``dict[str, Any]`` in a signature hides a shape from mypy. This walks the parsed
source of ``app/services`` (nothing is imported) and lists every function or method whose
parameters or return annotation mention ``dict[str, Any]`` or ``Mapping[str, Any]`` (the
read-only spelling of the same thing), at any depth (``list[dict[str, Any]]`` counts).
``Mapping[str, object]`` is not counted: it is what a sink that stores or sends a JSON object
without reading it takes (the event log's ``emit``), and a producer's TypedDict checks against it.

    python scripts/count_untyped.py            # the count, then one line per function
    python scripts/count_untyped.py --count    # the count only

tests/test_architecture.py holds the committed ceiling, so the count can only fall.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "app" / "services"
UNTYPED = ("dict[str, Any]", "Mapping[str, Any]")


@dataclass(frozen=True, slots=True)
class Untyped:
    """One function whose signature carries free-form JSON."""

    path: str  # relative to the repository root
    line: int
    name: str  # dotted inside the module: ``Class.method`` or ``function``

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}"


def _annotations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every.extend(a for a in (args.vararg, args.kwarg) if a is not None)
    found = [a.annotation for a in every if a.annotation is not None]
    if node.returns is not None:
        found.append(node.returns)
    return found


def _is_untyped(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value  # a quoted forward reference
    return any(u in text for u in UNTYPED)


def untyped_in(path: Path) -> list[Untyped]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT).as_posix()
    found: list[Untyped] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if any(_is_untyped(a) for a in _annotations(child)):
                    found.append(Untyped(rel, child.lineno, prefix + child.name))
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def untyped_service_functions() -> list[Untyped]:
    return [u for path in sorted(SERVICES.rglob("*.py")) for u in untyped_in(path)]


def main(argv: list[str]) -> int:
    found = untyped_service_functions()
    print(f"{len(found)} service functions take or return dict[str, Any]")
    if "--count" not in argv:
        for u in found:
            print(f"  {u}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
