"""The OpenAPI document: FastAPI's, plus what FastAPI cannot say by itself.

- Operation summaries written for people (``app.api.summaries``), not FastAPI's title-cased
  function names.
- ``Problem``: the one problem+json schema every error response refers to (``app.api.responses``).
- U+0000 in any string is refused before an endpoint runs (``app.api.limits``; PostgreSQL cannot
  store it): every request string says so with ``"not": {"pattern": "\\u0000"}`` (a negated
  search, cheap for validators and generators, where a whole-string pattern made schemathesis'
  coverage phase ten times slower). Strings inside free-form JSON values (``{}`` schemas) cannot
  carry it; the API description says it once for all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from app.api.summaries import SUMMARIES

__all__ = ["NO_NUL", "Problem", "install_openapi"]

NO_NUL: dict[str, Any] = {"pattern": "\\u0000"}


class FieldError(BaseModel):
    loc: list[str | int] = Field(
        description="Where: `body`, `query`, `path` or `header`, then keys."
    )
    msg: str
    type: str


class Problem(BaseModel):
    """An error (RFC 9457): `code` is stable and machine-readable, `detail` says what was wrong
    and what to do. Some problems add fields: `errors` (schema errors), `index` (the offending
    message), `turn_id`, `tokens` and `cap`, `line`/`column`/`excerpt` (malformed JSON), ..."""

    model_config = ConfigDict(extra="allow")

    # No examples here: each response gives its own, of its own status (``problem_examples``).
    type: str = Field(description="`https://ctxsvc.dev/problems/<code>`.")
    title: str = Field(description="The status's reason phrase.")
    status: int
    detail: str
    code: str
    errors: list[FieldError] | None = Field(
        default=None, description="`invalid_request` from the schema: each failed rule."
    )


def _request_schemas(spec: dict[str, Any]) -> set[str]:
    """Names of the components a request (parameter or body) can reach."""
    components = spec.get("components", {}).get("schemas", {})
    pending: list[Any] = []
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            pending.extend(operation.get("parameters", []))
            pending.append(operation.get("requestBody", {}))
    seen: set[str] = set()
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    pending.append(components.get(name, {}))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return seen


def _no_nul(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string" and not {"enum", "const", "not"} & set(node):
            node["not"] = dict(NO_NUL)
        for value in node.values():
            _no_nul(value)
    elif isinstance(node, list):
        for value in node:
            _no_nul(value)


def _complete(spec: dict[str, Any]) -> dict[str, Any]:
    """Add what FastAPI cannot say, in place (idempotent: FastAPI caches the document)."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    if "Problem" in schemas:
        return spec
    for name in _request_schemas(spec):
        _no_nul(schemas[name])
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            _no_nul(operation.get("parameters", []))
            _no_nul(operation.get("requestBody", {}))
            summary = SUMMARIES.get((method.upper(), path))
            if summary is not None:
                operation["summary"] = summary
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    return spec


def install_openapi(app: FastAPI) -> None:
    """Serve the completed document at ``/openapi.json`` (and from ``app.openapi()``)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        return _complete(generate())

    app.openapi = openapi  # type: ignore[method-assign]
