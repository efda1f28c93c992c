"""Tool failures reach the model, end to end over real HTTP (spec §9 "Tool state on the wire"):
a turn's results posted as error, denied or interrupted are recognizable in the next request a
loopback provider receives, in both protocols, and no tool message is sent empty."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session, run_turn
from tests.api.test_turns import agent, post_results
from tests.providers.fakes import (
    FakeProviderServer,
    FakeToolCall,
    FakeToolUse,
    StreamReply,
    anthropic_stream,
    openai_stream,
)

pytestmark = pytest.mark.anyio

CALL_IDS = ("c_ok", "c_error", "c_denied", "c_interrupted")
RESULTS: list[dict[str, Any]] = [
    {"tool_call_id": "c_ok", "state": "success", "output": []},
    {"tool_call_id": "c_error", "state": "error", "output": [{"type": "text", "text": "exit 1"}]},
    {
        "tool_call_id": "c_denied",
        "state": "denied",
        "output": [{"type": "text", "text": "the user said no"}],
    },
    {"tool_call_id": "c_interrupted", "state": "interrupted", "output": []},
]


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    with FakeProviderServer() as server:
        yield server


async def model_for(api: httpx.AsyncClient, server: FakeProviderServer, kind: str) -> str:
    model_id = f"fake-{uuid.uuid4().hex[:8]}"
    base = server.base_url + ("/v1" if kind == "openai_chat" else "")
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": kind,
            "base_url": base,
            "model_name": "fake",
            "api_key_env": "CTXSVC_TEST_FAKE_KEY",
        },
    }
    assert (await api.put(f"/v1/models/{model_id}", json=body)).status_code == 201
    return model_id


async def run_with_results(
    api: httpx.AsyncClient, provider: FakeProviderServer, kind: str
) -> dict[str, Any]:
    model_id = await model_for(api, provider, kind)
    sid = await new_session(api, model_id=model_id, agent=agent())
    turn = await run_turn(api, sid)
    assert turn["status"] == "running", turn["outcome"]
    assert [c["tool_call_id"] for c in turn["pending_tool_calls"]] == list(CALL_IDS)
    done = await post_results(api, sid, turn["turn_id"], *RESULTS, wait=True)
    assert done.json()["status"] == "completed", done.text
    second: dict[str, Any] = provider.requests[1].json()
    return second


async def test_openai_chat_sends_a_state_line_and_never_an_empty_tool_message(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    calls = [FakeToolCall(call_id, "read", [f'{{"path": "{call_id}"}}']) for call_id in CALL_IDS]
    provider.enqueue(
        StreamReply(openai_stream(tool_calls=calls, finish_reason="tool_calls")),
        StreamReply(openai_stream(text=["Noted."])),
    )
    second = await run_with_results(api, provider, "openai_chat")
    tools = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert tools == {
        "c_ok": "[no output]",
        "c_error": "[tool state: error]\nexit 1",
        "c_denied": "[tool state: denied]\nthe user said no",
        "c_interrupted": "[tool state: interrupted]",
    }


async def test_anthropic_marks_is_error_and_sends_the_state_line(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    uses = [FakeToolUse(call_id, "read", [f'{{"path": "{call_id}"}}']) for call_id in CALL_IDS]
    provider.enqueue(
        StreamReply(anthropic_stream(tool_uses=uses, stop_reason="tool_use")),
        StreamReply(anthropic_stream(text=["Noted."])),
    )
    second = await run_with_results(api, provider, "anthropic_messages")
    blocks = {
        b["tool_use_id"]: (b.get("is_error", False), [p["text"] for p in b["content"]])
        for m in second["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    assert blocks == {
        "c_ok": (False, ["[no output]"]),
        "c_error": (True, ["[tool state: error]", "exit 1"]),
        "c_denied": (True, ["[tool state: denied]", "the user said no"]),
        "c_interrupted": (True, ["[tool state: interrupted]"]),
    }
