"""The core stays pure: ``app.core`` imports only the standard library and itself.

Walks the import statements of every module under ``app/core`` (parsed, not executed), so a
forbidden import fails here even if it sits in a branch that never runs.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "app" / "core"
FORBIDDEN = {
    "fastapi",
    "pydantic",
    "sqlalchemy",
    "httpx",
    "tiktoken",
    "starlette",
    "alembic",
    # Observability is wired at the service layer (app/observability), never in the core.
    "opentelemetry",
    "prometheus_client",
}


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: inside app.core by construction
                continue
            found.append((node.lineno, node.module or ""))
    return found


def is_allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top in FORBIDDEN:
        return False
    return module == "app.core" or module.startswith("app.core.") or top in sys.stdlib_module_names


def test_the_core_has_modules_to_check() -> None:
    assert len(core_modules()) > 5


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_only_the_standard_library_and_the_core(path: Path) -> None:
    offending = [
        f"line {line}: {name}" for line, name in imported_modules(path) if not is_allowed(name)
    ]
    assert not offending, f"{path.name} imports outside the pure core: {offending}"


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("json", True),
        ("collections.abc", True),
        ("app.core.content", True),
        ("app.storage.models", False),
        ("app", False),
        ("fastapi", False),
        ("pydantic.dataclasses", False),
        ("tiktoken", False),
        ("opentelemetry.trace", False),
        ("prometheus_client", False),
        ("yaml", False),
    ],
)
def test_the_rule_itself(module: str, allowed: bool) -> None:
    assert is_allowed(module) is allowed


ROOT = CORE.parents[1]
CLIENT = ROOT / "clients" / "python" / "src" / "ctxsvc_client"
WEB = ROOT / "app" / "web"


@pytest.mark.parametrize("path", sorted(CLIENT.rglob("*.py")), ids=lambda p: p.name)
def test_the_client_imports_only_httpx_pydantic_and_the_standard_library(path: Path) -> None:
    # A calling service installs the client alone (clients/python/tests/test_client_install.py);
    # docstring_parser (no dependencies of its own) reads @function_tool docstrings.
    allowed = {"httpx", "pydantic", "docstring_parser", "ctxsvc_client"}
    offending = [
        f"line {line}: {name}"
        for line, name in imported_modules(path)
        if name.split(".")[0] not in allowed and name.split(".")[0] not in sys.stdlib_module_names
    ]
    assert not offending, f"{path.name} imports {offending}"


@pytest.mark.parametrize("path", sorted(WEB.rglob("*.py")), ids=lambda p: p.name)
def test_the_context_map_reads_through_the_services_not_the_storage(path: Path) -> None:
    offending = [
        f"line {line}: {name}"
        for line, name in imported_modules(path)
        if name.startswith(("app.storage", "sqlalchemy"))
    ]
    assert not offending, f"{path.name} imports {offending}"


APP = ROOT / "app"


@pytest.mark.parametrize("path", sorted(APP.rglob("*.py")), ids=lambda p: str(p.relative_to(APP)))
def test_the_service_imports_no_httpx(path: Path) -> None:
    # httpx is a test and benchmark dependency only (pyproject's dev extra): the provider
    # adapters use aiohttp, so an image built with the runtime dependencies has no httpx.
    offending = [
        f"line {line}: {name}"
        for line, name in imported_modules(path)
        if name.split(".")[0] == "httpx"
    ]
    assert not offending, f"{path.name} imports {offending}"
