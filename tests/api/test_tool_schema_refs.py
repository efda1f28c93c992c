"""An agent tool whose input schema has a ``$ref`` that resolves to nothing is refused when the
session is created, naming the tool; references that do resolve within the
schema are accepted, and nothing is ever fetched."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import session_body
from tests.providers.fakes import FakeProviderServer

pytestmark = pytest.mark.anyio


def agent_with(*schemas: dict[str, Any]) -> dict[str, Any]:
    tools = [
        {"name": f"tool_{index}", "description": "d", "input_schema": schema}
        for index, schema in enumerate(schemas)
    ]
    return {"system_prompt": "You are a careful agent.", "tools": tools}


async def session_count(api: httpx.AsyncClient) -> int:
    return len((await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"])


UNRESOLVABLE = {
    "pointer to nothing": (
        {"properties": {"p": {"$ref": "#/$defs/missing"}}},
        "#/$defs/missing",
        "points to nothing",
    ),
    "draft-07 definitions": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"path": {"type": "string"}},
            "properties": {"a": {"$ref": "#/definitions/path"}, "b": {"$ref": "#/definitions/b"}},
        },
        "#/definitions/b",
        "points to nothing",
    ),
    "unknown anchor": (
        {"items": {"$ref": "#node"}},
        "#node",
        "no subschema declares the anchor 'node'",
    ),
    "another document": (
        {"properties": {"p": {"$ref": "common.json#/$defs/path"}}},
        "common.json#/$defs/path",
        "never fetches",
    ),
    "deep inside an applicator": (
        {"anyOf": [{"type": "null"}, {"prefixItems": [{"not": {"$ref": "#/$defs/gone"}}]}]},
        "#/$defs/gone",
        "points to nothing",
    ),
}


@pytest.mark.parametrize(
    ("schema", "reference", "why"), UNRESOLVABLE.values(), ids=list(UNRESOLVABLE)
)
async def test_an_unresolvable_ref_is_refused_naming_the_tool(
    api: httpx.AsyncClient, schema: dict[str, Any], reference: str, why: str
) -> None:
    before = await session_count(api)
    body = session_body(agent=agent_with({"type": "object"}, schema))
    response = await api.post("/v1/sessions", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "unresolvable_schema_ref"
    assert (problem["tool"], problem["ref"]) == ("tool_1", reference)
    assert "tool 'tool_1'" in problem["detail"]
    assert why in problem["detail"]
    assert await session_count(api) == before


RESOLVABLE = {
    "local $defs": {
        "$defs": {"path": {"type": "string"}},
        "properties": {"p": {"$ref": "#/$defs/path"}},
    },
    "an anchor": {"$defs": {"n": {"$anchor": "node"}}, "items": {"$ref": "#node"}},
    "relative to an embedded $id": {
        "$id": "https://schemas.example/root.json",
        "$defs": {"inner": {"$id": "inner.json", "$defs": {"s": {"type": "string"}}}},
        "properties": {"p": {"$ref": "inner.json#/$defs/s"}},
    },
    "recursive tree": {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
    },
    "a property named $ref": {"properties": {"$ref": {"type": "string"}}},
    # Draft 4's tuple form is no 2020-12 schema: not this check's business (nothing validates it).
    "tuple items under 2020-12": {"items": [{"$ref": "#/$defs/gone"}]},
    "$ref-shaped data": {
        "enum": [{"$ref": "#/nowhere"}],
        "default": {"$ref": "https://elsewhere.example/x.json"},
    },
}


@pytest.mark.parametrize("schema", RESOLVABLE.values(), ids=list(RESOLVABLE))
async def test_references_that_resolve_within_the_schema_are_accepted(
    api: httpx.AsyncClient, schema: dict[str, Any]
) -> None:
    response = await api.post("/v1/sessions", json=session_body(agent=agent_with(schema)))
    assert response.status_code == 201, response.text
    assert response.json()["agent"]["tools"][0]["input_schema"] == schema


async def test_the_check_fetches_nothing(api: httpx.AsyncClient) -> None:
    with FakeProviderServer() as server:
        schema = {"properties": {"p": {"$ref": f"{server.base_url}/schema.json"}}}
        response = await api.post("/v1/sessions", json=session_body(agent=agent_with(schema)))
        assert server.connections == 0
    assert response.status_code == 422, response.text
    assert response.json()["ref"] == f"{server.base_url}/schema.json"


async def test_a_patch_cannot_bring_in_another_agent(api: httpx.AsyncClient) -> None:
    """The agent (and its tools) is fixed at creation: a PATCH naming it is refused, so creation
    is the one place a tool schema enters a session."""
    created = await api.post("/v1/sessions", json=session_body(agent=agent_with({})))
    sid = created.json()["id"]
    broken = agent_with({"properties": {"p": {"$ref": "#/$defs/missing"}}})
    response = await api.patch(f"/v1/sessions/{sid}", json={"agent": broken})
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"
    stored = (await api.get(f"/v1/sessions/{sid}")).json()
    assert stored["agent"]["tools"][0]["input_schema"] == {}
