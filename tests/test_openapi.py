"""``openapi/openapi.json`` is generated from the app; this fails when it drifts."""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from pathlib import Path
from typing import Any

from app.api.summaries import SUMMARIES
from app.cli import openapi_document

OPENAPI_DOC = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    assert OPENAPI_DOC.read_text(encoding="utf-8") == openapi_document(), (
        "openapi/openapi.json is stale: regenerate it with `.venv/bin/ctxsvc openapi`"
    )


def test_every_documented_error_is_problem_json() -> None:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    for path, operations in spec["paths"].items():
        for verb, operation in operations.items():
            for status, response in operation.get("responses", {}).items():
                if status.startswith(("4", "5")):
                    assert "application/problem+json" in response.get("content", {}), (
                        f"{verb.upper()} {path} {status} is not documented as problem+json"
                    )


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    return [
        (verb.upper(), path, operation)
        for path, operations in spec["paths"].items()
        for verb, operation in operations.items()
    ]


def test_every_error_example_is_of_its_own_status_and_codes() -> None:
    # Swagger UI and ReDoc once showed `404 session_not_found` under every status, a 401 too.
    checked = 0
    for verb, path, operation in _operations():
        for status, response in operation.get("responses", {}).items():
            if not status.startswith(("4", "5")):
                continue
            media = response["content"]["application/problem+json"]
            codes = media["schema"]["properties"]["code"]["enum"]
            example = media.get("example")
            assert example is not None, f"{verb} {path} {status} has no example"
            where = f"{verb} {path} {status}"
            assert example["status"] == int(status), where
            assert example["code"] in codes, where
            assert example["title"] == HTTPStatus(int(status)).phrase, where
            assert example["type"] == f"https://ctxsvc.dev/problems/{example['code']}", where
            # A sentence written for the code, not the fallback "<phrase>: see `code`".
            assert example["detail"], where
            assert not example["detail"].startswith(example["title"]), where
            checked += 1
    assert checked > 100


def test_the_401_of_counting_tokens_shows_the_missing_key() -> None:
    [responses] = [op["responses"] for v, p, op in _operations() if p == "/v1/tokens/count"]
    example = responses["401"]["content"]["application/problem+json"]["example"]
    assert (example["status"], example["code"]) == (401, "unauthorized")
    assert "Authorization: Bearer" in example["detail"]


def test_the_problem_schema_itself_suggests_no_status() -> None:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    problem = json.dumps(spec["components"]["schemas"]["Problem"])
    assert "session_not_found" not in problem
    assert "examples" not in problem


def _generated_summary(operation: dict[str, Any], path: str, verb: str) -> str:
    # FastAPI's default: the endpoint function's name, title-cased. The operationId is that
    # name followed by the path and the method.
    suffix = re.sub(r"\W", "_", path) + "_" + verb.lower()
    name = str(operation["operationId"]).removesuffix(suffix)
    return name.replace("_", " ").title()


def test_every_operation_has_a_summary_written_for_people() -> None:
    operations = _operations()
    assert {(verb, path) for verb, path, _ in operations} == set(SUMMARIES)
    for verb, path, operation in operations:
        summary = operation["summary"]
        assert summary == SUMMARIES[(verb, path)]
        assert summary != _generated_summary(operation, path, verb), f"{verb} {path}: {summary}"
        assert summary[0].isupper(), f"{verb} {path}: {summary}"
        assert not summary.endswith("."), f"{verb} {path}: {summary}"


def test_the_generated_title_is_recognised() -> None:
    # The rule above would pass vacuously if the operationId no longer ended as assumed.
    [(verb, path, operation)] = [o for o in _operations() if o[1] == "/v1/prepare"]
    assert _generated_summary(operation, path, verb) == "Prepare Stateless"


def test_liveness_and_readiness_document_their_answers() -> None:
    spec = json.loads(OPENAPI_DOC.read_text(encoding="utf-8"))
    schemas = spec["components"]["schemas"]
    health = spec["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]
    assert health["schema"] == {"$ref": "#/components/schemas/Health"}
    assert schemas["Health"]["examples"] == [{"status": "ok"}]
    assert schemas["Health"]["required"] == ["status"]
    assert "additionalProperties" not in schemas["Health"]  # no {"property1": …} sample
    ready = spec["paths"]["/readyz"]["get"]
    assert ready["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Readiness"
    }
    assert [p["name"] for p in ready["parameters"]] == ["providers"]
