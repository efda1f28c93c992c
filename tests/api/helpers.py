"""Small builders shared by the API tests."""

from __future__ import annotations

from typing import Any

import httpx


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": text(t)}


def assistant(t: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text(t)}


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
    """A session of a coding agent unless the agent names its preset: the suite's requests are
    the ones the ``coding`` preset reproduces (every section, both control tools)."""
    body: dict[str, Any] = {
        "model_id": "local",
        "agent": {
            "system_prompt": "You are a careful agent.",
            "tools": [{"name": "read", "description": "Read a file", "input_schema": {}}],
        },
    }
    body.update(overrides)
    if isinstance(body.get("agent"), dict):
        body["agent"] = {"preset": "coding", **body["agent"]}
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


async def prepare_session(api: httpx.AsyncClient, session_id: str, **params: Any) -> httpx.Response:
    """``POST /v1/sessions/{id}/prepare`` (params become the query string)."""
    return await api.post(f"/v1/sessions/{session_id}/prepare", params=params, json={})


def provenance_without_tokens(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A prepare answer's provenance without the token shares, after checking they add up."""
    entries = result["provenance"]
    assert sum(p["tokens"] for p in entries) == result["budget"]["conversation_tokens"]
    return [{k: v for k, v in p.items() if k != "tokens"} for p in entries]


def world_state_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of each stored ``world_state`` message, in order."""
    return [m["content"][0]["text"] for m in messages if m["kind"] == "world_state"]


async def scripted_model(
    api: httpx.AsyncClient, script: list[dict[str, Any]], **capabilities: Any
) -> str:
    """Register a ``scripted`` model under a fresh id (models are global) and return the id."""
    import uuid

    model_id = f"scripted-{uuid.uuid4().hex[:10]}"
    body: dict[str, Any] = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "scripted", "script": script},
    }
    body.update(capabilities)
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    return model_id


async def fake_provider_model(
    api: httpx.AsyncClient,
    base_url: str,
    kind: str = "openai_chat",
    *,
    key_env: str = "CTXSVC_TEST_FAKE_KEY",
    **capabilities: Any,
) -> str:
    """Register a model of ``kind`` (``openai_chat`` or ``anthropic_messages``) served by the
    loopback fake at ``base_url`` under a fresh id, its key in ``key_env``; returns the id."""
    import uuid

    model_id = f"fake-{kind}-{uuid.uuid4().hex[:10]}"
    body: dict[str, Any] = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": kind,
            # OpenAI's base URL names the API version, Anthropic's does not.
            "base_url": base_url + ("/v1" if kind == "openai_chat" else ""),
            "model_name": f"{kind}-fake",
            "api_key_env": key_env,
        },
    }
    body.update(capabilities)
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    return model_id


async def run_turn(
    api: httpx.AsyncClient, session_id: str, text_: str = "go", **body: Any
) -> dict[str, Any]:
    """Start a turn with ``?wait=true`` and return the turn (terminal or waiting for tools)."""
    import uuid

    payload = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": text_}]}
    payload.update(body)
    response = await api.post(
        f"/v1/sessions/{session_id}/turns", params={"wait": "true"}, json=payload
    )
    assert response.status_code in (200, 202), response.text
    return dict(response.json())
