"""Small builders shared by the API tests."""

from __future__ import annotations

from typing import Any

import httpx


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": text(t)}


def assistant_calls(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": i, "name": n, "input": "{}"} for i, n in calls],
    }


def tool_result(call_id: str, output: str = "ok", state: str = "success") -> dict[str, Any]:
    return {
        "role": "tool",
        "content": [
            {
                "type": "tool_result",
                "id": call_id,
                "name": "",
                "output": text(output),
                "state": state,
            }
        ],
    }


def session_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_id": "local",
        "agent": {
            "system_prompt": "You are a careful agent.",
            "tools": [{"name": "read", "description": "Read a file", "input_schema": {}}],
        },
    }
    body.update(overrides)
    return body


async def new_session(api: httpx.AsyncClient, **overrides: Any) -> str:
    response = await api.post("/v1/sessions", json=session_body(**overrides))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def append(api: httpx.AsyncClient, session_id: str, *messages: Any) -> httpx.Response:
    return await api.post(f"/v1/sessions/{session_id}/messages", json={"messages": list(messages)})


async def stored(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/sessions/{session_id}/messages", params={"limit": 500})
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])
