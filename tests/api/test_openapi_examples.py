"""Every request example in ``openapi/openapi.json`` is accepted by a live app with the success
status its operation documents, on both engines.

Examples work as-is in Swagger UI's "Try it out"; the only thing this test supplies is what the
path names (a session, a model id, a waiting turn, a checkpoint) and the id of a checkpoint for
rewind, which only the caller's own session can have.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session, run_turn, scripted_model

pytestmark = pytest.mark.anyio

OPENAPI_DOC = json.loads(
    (Path(__file__).resolve().parents[2] / "openapi" / "openapi.json").read_text(encoding="utf-8")
)


def body_examples() -> list[tuple[str, str, str, Any]]:
    """(method, path template, example name, value) of every request body example."""
    found = []
    for path, operations in OPENAPI_DOC["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            for name, example in content.get("application/json", {}).get("examples", {}).items():
                found.append((method.upper(), path, name, example["value"]))
    return found


def success_status(method: str, path: str) -> int:
    documented = [
        int(s) for s in OPENAPI_DOC["paths"][path][method.lower()]["responses"] if s[0] == "2"
    ]
    # A first call creates (201) or accepts (202) where the operation documents that.
    return next((s for s in (201, 202) if s in documented), min(documented))


def test_every_operation_with_a_body_has_an_example() -> None:
    with_body = {
        (method.upper(), path)
        for path, operations in OPENAPI_DOC["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    }
    assert with_body == {(m, p) for m, p, _, _ in body_examples()}


async def waiting_turn(api: httpx.AsyncClient) -> tuple[str, str]:
    """A session whose turn waits for the result of call ``call_1`` (the example's)."""
    model = await scripted_model(
        api,
        [
            {"tool_calls": [{"id": "call_1", "name": "read_file", "input": {"path": "README.md"}}]},
            {"text": "Install with pip."},
        ],
    )
    tool = {"name": "read_file", "description": "Read a file.", "input_schema": {}}
    sid = await new_session(api, model_id=model, agent={"system_prompt": "p", "tools": [tool]})
    turn = await run_turn(api, sid)
    assert turn["phase"] == "waiting_tool_results", turn
    return sid, turn["turn_id"]


async def compacted(api: httpx.AsyncClient) -> tuple[str, str]:
    """A session with one checkpoint (its conversation from the append example)."""
    sid = await new_session(api)
    append = next(v for m, p, _, v in body_examples() if p.endswith("/messages"))
    assert (await api.post(f"/v1/sessions/{sid}/messages", json=append)).status_code == 201
    compaction = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert compaction.status_code == 201, compaction.text
    return sid, compaction.json()["compaction_id"]


async def concrete(api: httpx.AsyncClient, path: str, value: Any) -> tuple[str, Any]:
    """The path with real ids, and the body (only a rewind's checkpoint id is replaced)."""
    if "{turn_id}" in path:
        sid, turn_id = await waiting_turn(api)
        return path.format(session_id=sid, turn_id=turn_id), value
    if path.endswith("/rewind"):
        sid, compaction_id = await compacted(api)
        return path.format(session_id=sid), {**value, "compaction_id": compaction_id}
    if "{pin_id}" in path:
        sid = await new_session(api)
        pin = {"kind": "fact", "text": "A pin the example replaces."}
        created = await api.post(f"/v1/sessions/{sid}/pins", json=pin)
        return path.format(session_id=sid, pin_id=created.json()["pin_id"]), value
    if path.endswith("/compactions"):
        sid, _ = await compacted(api)  # a conversation to summarize again
        return path.format(session_id=sid), value
    if "{session_id}" in path:
        return path.format(session_id=await new_session(api)), value
    if "{model_id}" in path:
        return path.format(model_id=f"example-{uuid.uuid4().hex[:8]}"), value
    return path, value


@pytest.mark.parametrize(
    ("method", "path", "name", "value"),
    body_examples(),
    ids=[f"{m} {p} {n}" for m, p, n, _ in body_examples()],
)
async def test_every_example_is_accepted(
    api: httpx.AsyncClient, method: str, path: str, name: str, value: Any
) -> None:
    url, body = await concrete(api, path, copy.deepcopy(value))
    response = await api.request(method, url, json=body)
    assert response.status_code == success_status(method, path), (name, response.text)
