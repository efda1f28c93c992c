"""The problem ``code``s the OpenAPI description documents are exactly those the code raises:
every documented code can be raised, every raised code is documented.

The raised codes are read from the source (parsed, not executed): the first argument of every
``ServiceError`` class (and of the ``_invalid`` helpers that wrap them), every ``code=`` keyword,
every ``problem_response`` code, with module constants resolved. Which operation answers with
which code is checked live by the schemathesis run (``tests/contract``): an answer whose code is
not in its operation's enum fails there.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPENAPI_DOC = ROOT / "openapi" / "openapi.json"
APP = ROOT / "app"
CODE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+")

# Raised, but never an HTTP answer of an operation, each for a reason.
NOT_ANSWERS = {
    # Settings validation at start-up (the summary retry policy built from CTXSVC_SUMMARY_*).
    "invalid_retry_policy",
    # The conversation_history tool's argument errors: a tool result the model sees.
    "invalid_arguments",
    # An in-turn compaction whose turn ended meanwhile: the turn's outcome, not an answer.
    "turn_not_running",
    # Starlette's own answers for a path or method that does not exist: not an operation's.
    "not_found",
    "method_not_allowed",
    "http_error",
    # The HTTP protocol's answers before any operation is chosen (``app.api.http_protocol``): a
    # request that is not HTTP/1.1, a request head past CTXSVC_MAX_HEADER_BYTES. Documented
    # once for every request (the API description, docs/api-notes.md).
    "malformed_request",
    "headers_too_large",
    # The compatible endpoints' own refusals (spec §21): answered in the provider protocol's
    # error shape (what its SDK reads), never as problem+json, and not in the API description.
    "invalid_model",
    "invalid_messages",
    "invalid_input",
    "invalid_system",
    "invalid_tools",
    "invalid_max_tokens",
    "invalid_sampling",
    "unsupported_block",
    "unsupported_tool",
    "previous_response_id_unsupported",
    "caller_keys_disabled",
    "context_budget_exceeded",
    # A bug (the one path to a 500), never documented as an outcome.
    "internal_error",
}


def _error_classes(trees: list[ast.Module]) -> set[str]:
    names = {"ServiceError"}
    changed = True
    while changed:
        changed = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {
                        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                        for b in node.bases
                    }
                    if bases & names:
                        names.add(node.name)
                        changed = True
    return names


def _constants(tree: ast.Module) -> dict[str, str]:
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def raised_codes() -> set[str]:
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(APP.rglob("*.py"))]
    classes = _error_classes(trees) - {"ProviderError"}  # a model call's error, mapped before
    constants: dict[str, str] = {}
    for tree in trees:
        constants.update(_constants(tree))

    def literal(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            first = node.args[0] if node.args else None
            # An error class that fixes its code passes it on: ``super().__init__("code", ...)``.
            if first is not None and (
                name in classes or name.startswith("_invalid") or name == "__init__"
            ):
                found.add(literal(first) or "")
            if name == "problem_response" and len(node.args) > 1:
                found.add(literal(node.args[1]) or "")
            for keyword in node.keywords:
                if keyword.arg == "code":
                    found.add(literal(keyword.value) or "")
    # First arguments that are details, not codes (classes whose code is fixed).
    return {code for code in found if CODE.fullmatch(code)}


def documented_codes() -> set[str]:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    codes: set[str] = set()
    for operations in spec["paths"].values():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/problem+json"]["schema"]
                    codes.update(schema["properties"]["code"]["enum"])
    return codes


def test_every_documented_code_is_raised_somewhere() -> None:
    assert documented_codes() - raised_codes() == set()


def test_every_raised_code_is_documented() -> None:
    assert raised_codes() - NOT_ANSWERS - documented_codes() == set()


def test_every_error_refers_to_the_one_problem_schema() -> None:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    assert spec["components"]["schemas"]["Problem"]["required"] == [
        "type",
        "title",
        "status",
        "detail",
        "code",
    ]
    for path, operations in spec["paths"].items():
        for verb, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/problem+json"]["schema"]
                    assert schema["allOf"] == [{"$ref": "#/components/schemas/Problem"}], (
                        f"{verb} {path} {status}"
                    )
                    assert schema["properties"]["status"] == {"const": int(status)}


def test_operations_document_only_what_they_can_return() -> None:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    models = spec["paths"]["/v1/models"]["get"]["responses"]
    # no 413 without a body, no 404, no 409; 429: the tenant's rate limit; 503: a database outage
    assert sorted(models) == ["200", "401", "422", "429", "503"]
    health = spec["paths"]["/healthz"]["get"]["responses"]
    assert sorted(health) == ["200", "422"]
