"""Turns against providers that answer ``stream: true`` with plain JSON:
a real server process, loopback fakes for both protocols, both engines.

Each model's first answer is a tool call, the second the final text, both complete JSON
bodies; the turn runs both rounds and completes. A body that is no answer fails the turn with
``model_protocol_error`` naming what was received.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.helpers import fake_provider_model, new_session
from tests.api.test_turns import agent
from tests.providers.fakes import (
    BodyReply,
    FakeProviderServer,
    anthropic_message,
    openai_completion,
)
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        **{KEY_ENV: "sk-test"},
    )
    with running([uvicorn_command(free_port())], env=env, cwd=tmp_path) as [process]:
        yield process


async def session_on(api: httpx.AsyncClient, provider: FakeProviderServer, kind: str) -> str:
    model_id = await fake_provider_model(api, provider.base_url, kind, key_env=KEY_ENV)
    return await new_session(api, model_id=model_id, summary_model_id="local", agent=agent())


def answers(kind: str) -> list[BodyReply]:
    if kind == "openai_chat":
        return [
            BodyReply(
                openai_completion(
                    tool_calls=[("call_1", "read", '{"path": "a.py"}')], finish_reason="tool_calls"
                )
            ),
            BodyReply(openai_completion(text="It says hello.")),
        ]
    return [
        BodyReply(
            anthropic_message(
                content=[
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}}
                ],
                stop_reason="tool_use",
            )
        ),
        BodyReply(anthropic_message(content=[{"type": "text", "text": "It says hello."}])),
    ]


async def turn(api: httpx.AsyncClient, sid: str, path: str = "turns", **body: Any) -> Any:
    response = await api.post(f"/v1/sessions/{sid}/{path}", params={"wait": "true"}, json=body)
    assert response.status_code in (200, 202), response.text
    return response.json()


@pytest.mark.parametrize("kind", ["openai_chat", "anthropic_messages"])
async def test_a_turn_runs_on_complete_json_answers(
    server: ServerProcess, provider: FakeProviderServer, kind: str
) -> None:
    provider.enqueue(*answers(kind))
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as api:
        sid = await session_on(api, provider, kind)
        start = {"client_request_id": "q", "input": [{"type": "text", "text": "what is in a.py?"}]}
        waiting = await turn(api, sid, **start)
        assert waiting["phase"] == "waiting_tool_results", waiting
        (call,) = waiting["pending_tool_calls"]
        # As the model wrote them: OpenAI's arguments text, Anthropic's input object as JSON.
        arguments = '{"path": "a.py"}' if kind == "openai_chat" else '{"path":"a.py"}'
        assert (call["name"], call["input"]) == ("read", arguments)
        result = {
            "tool_call_id": call["tool_call_id"],
            "state": "success",
            "output": [{"type": "text", "text": "hello"}],
        }
        done = await turn(api, sid, f"turns/{waiting['turn_id']}/tool-results", results=[result])
    assert (done["status"], done["outcome"]) == ("completed", {"final_text": "It says hello."})
    # The second request carried the tool result back (the answer was understood).
    assert "hello" in provider.requests[1].body.decode()


@pytest.mark.parametrize("kind", ["openai_chat", "anthropic_messages"])
async def test_a_body_that_is_no_answer_fails_the_turn_saying_what_came(
    server: ServerProcess, provider: FakeProviderServer, kind: str
) -> None:
    provider.enqueue(BodyReply("<html>maintenance</html>", content_type="text/html"))
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as api:
        sid = await session_on(api, provider, kind)
        done = await turn(
            api, sid, client_request_id="q", input=[{"type": "text", "text": "hello?"}]
        )
    assert (done["status"], done["outcome"]["code"]) == ("failed", "model_protocol_error")
    message = done["outcome"]["message"]
    assert "received HTTP 200, content type text/html, 24 bytes" in message
    assert "maintenance" not in message  # never the bytes of whatever answered
