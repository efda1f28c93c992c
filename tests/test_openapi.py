"""``openapi/openapi.json`` is generated from the app; this fails when it drifts."""

from __future__ import annotations

from pathlib import Path

from app.cli import openapi_document

SPEC = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    assert SPEC.read_text(encoding="utf-8") == openapi_document(), (
        "openapi/openapi.json is stale: regenerate it with `.venv/bin/ctxsvc openapi`"
    )


def test_every_documented_error_is_problem_json() -> None:
    import json

    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    for path, operations in spec["paths"].items():
        for verb, operation in operations.items():
            for status, response in operation.get("responses", {}).items():
                if status.startswith(("4", "5")):
                    assert "application/problem+json" in response.get("content", {}), (
                        f"{verb.upper()} {path} {status} is not documented as problem+json"
                    )
