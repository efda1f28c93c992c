"""An artifact compaction cannot decode is refused where it would be stored (spec §7.5, §8).

Compaction re-derives ``edited_paths`` from every stored message and fails on an undecodable
artifact; messages are never deleted, so one stored bad artifact used to fail every later
compaction and rewind of its session. Append and turn tool results now refuse it up front.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import (
    append,
    assistant,
    assistant_calls,
    new_session,
    run_turn,
    scripted_model,
    stored,
    tool_result,
    user,
)
from tests.conftest import client_for, make_settings
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio

UNDECODABLE = [
    {"kind": "file_change", "payload": {"path": 5}},
    {"kind": "file_change", "payload": "src/a.py"},
    {"kind": "file_change", "payload": {"path": "a.py", "undone": "yes"}},
]


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    fast = {"summary_retry_delay_seconds": 0.0, "summary_attempt_timeout_seconds": 5.0}
    async for client in client_for(make_settings(database_url, **fast)):
        yield client


def result_with(call_id: str, *artifacts: dict[str, Any]) -> dict[str, Any]:
    message = tool_result(call_id)
    return {**message, "content": [{**message["content"][0], "artifacts": list(artifacts)}]}


def refused_as_invalid_artifact(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "invalid_request"
    assert "invalid file_change artifact" in response.json()["detail"]


@pytest.mark.parametrize("artifact", UNDECODABLE)
async def test_append_refuses_it_and_compaction_keeps_working(
    api: httpx.AsyncClient, artifact: dict[str, Any]
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("u1"), assistant("a2"))
    first = await api.post(
        f"/v1/sessions/{sid}/compactions",
        json={"summary": VALID, "through_message_sequence": 2, "allow_larger": True},
    )
    assert first.status_code == 201, first.text

    refused = await append(
        api, sid, user("u3"), assistant_calls(("c1", "edit")), result_with("c1", artifact)
    )
    refused_as_invalid_artifact(refused)
    assert len(await stored(api, sid)) == 2

    decodable = {"kind": "file_change", "payload": {"path": "src/a.py", "undone": False}}
    accepted = await append(
        api, sid, user("u3"), assistant_calls(("c1", "edit")), result_with("c1", decodable)
    )
    assert accepted.status_code == 201, accepted.text
    for path, body in (
        ("compactions", {"summary": VALID, "through_message_sequence": 5, "allow_larger": True}),
        ("compactions", {"allow_larger": True}),
        ("rewind", {"compaction_id": first.json()["compaction_id"]}),
    ):
        response = await api.post(f"/v1/sessions/{sid}/{path}", json=body)
        assert response.status_code == 201, response.text
        assert response.json()["runtime_state"]["edited_paths"] == ["src/a.py"]


async def test_a_turn_tool_result_with_it_is_refused_and_nothing_is_recorded(
    api: httpx.AsyncClient,
) -> None:
    model_id = await scripted_model(
        api, [{"tool_calls": [{"name": "read", "input": {"path": "a.py"}}]}, {"text": "ok"}]
    )
    sid = await new_session(api, model_id=model_id, summary_model_id="local")
    turn = await run_turn(api, sid)
    (pending,) = turn["pending_tool_calls"]
    url = f"/v1/sessions/{sid}/turns/{turn['turn_id']}/tool-results"
    result = {
        "tool_call_id": pending["tool_call_id"],
        "state": "success",
        "output": [{"type": "text", "text": "body"}],
    }

    refused = await api.post(url, json={"results": [{**result, "artifacts": UNDECODABLE[:1]}]})
    refused_as_invalid_artifact(refused)
    again = await api.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")
    assert again.json()["phase"] == "waiting_tool_results"
    assert again.json()["pending_tool_calls"] == turn["pending_tool_calls"]

    done = await api.post(url, params={"wait": "true"}, json={"results": [result]})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
