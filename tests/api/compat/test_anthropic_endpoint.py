"""The Anthropic Messages drop-in endpoint (spec §21) driven by the real ``anthropic`` SDK: a
real ``uvicorn`` of the app in front of the loopback fake provider (Chat Completions, with
OpenAI's automatic prompt cache). The SDK user keeps the whole history and resends it; the
service continues one session and reports the provider's cache reads in Anthropic's terms."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from tests.api.compat.e2e import KEY_ENV, register, session, stored
from tests.providers.fake_chat_cache import ScriptedChat
from tests.providers.fakes import FakeProviderServer, FakeToolUse, StreamReply, anthropic_stream
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

# Over the fake cache's 1024-token minimum: later calls read it from the cache.
SYSTEM = "You answer questions about the repository. " * 120
TOOLS: list[Any] = [
    {
        "name": "read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def sdk(server: ServerProcess, request: pytest.FixtureRequest) -> anthropic.Anthropic:
    client = anthropic.Anthropic(
        base_url=f"{server.url}/v1/compat/anthropic", api_key="unused", max_retries=0, timeout=60
    )
    request.addfinalizer(client.close)
    return client


def test_a_conversation_continues_one_session_streamed_or_not(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server, request)
    history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
    script.answers.append("It prints hello.")
    raw = client.messages.with_raw_response.create(
        model=model, max_tokens=500, system=SYSTEM, messages=history
    )
    first = raw.parse()
    sid = raw.headers["x-ctxsvc-session-id"]
    assert first.content[0].type == "text"
    assert first.content[0].text == "It prints hello."
    assert first.stop_reason == "end_turn"
    assert first.model == model
    assert first.usage.cache_read_input_tokens == 0  # nothing cached yet
    assert first.usage.input_tokens > 1000

    history += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "And b.py?"},
    ]
    script.answers.append("It prints bye.")
    with client.messages.stream(
        model=model, max_tokens=500, system=SYSTEM, messages=history
    ) as stream:
        assert stream.response.headers["x-ctxsvc-session-id"] == sid
        texts = list(stream.text_stream)
        second = stream.get_final_message()
    assert "".join(texts) == "It prints bye."
    assert second.content[0].type == "text"
    assert second.content[0].text == "It prints bye."
    # The system prompt and the first exchange were sent as before: the provider read them from
    # its cache, and Anthropic's input_tokens leaves that part out, as Anthropic's does.
    read = second.usage.cache_read_input_tokens
    assert read is not None
    assert read >= 1024
    assert second.usage.input_tokens < read
    assert script.bodies[-1]["messages"][0] == {"role": "system", "content": SYSTEM}

    assert [(m["role"], m["content"][0].get("text")) for m in stored(server, sid)] == [
        ("user", "What does a.py do?"),
        ("assistant", "It prints hello."),
        ("user", "And b.py?"),
        ("assistant", "It prints bye."),
    ]
    assert session(server, sid)["origin"] == "proxy:anthropic_messages"


@pytest.mark.parametrize("streamed", [False, True])
def test_tool_use_over_rounds_stays_one_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
    streamed: bool,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server, request)
    script.answers.extend(
        [
            [("toolu_1", "read", '{"path": "a.py"}')],
            [("toolu_2", "read", '{"path":"b.py"}')],
            "a.py prints hello, b.py prints bye.",
        ]
    )
    files = {"a.py": "print('hello')", "b.py": "print('bye')"}
    history: list[Any] = [{"role": "user", "content": "Summarize a.py and b.py"}]
    sessions = set()
    # The SDK user's own loop: run each tool_use, send its result back in a user turn.
    for _ in range(3):
        ask: dict[str, Any] = {"model": model, "max_tokens": 500, "messages": history}
        if streamed:
            with client.messages.stream(**ask, tools=TOOLS) as stream:
                sessions.add(stream.response.headers["x-ctxsvc-session-id"])
                message = stream.get_final_message()
        else:
            raw = client.messages.with_raw_response.create(**ask, tools=TOOLS)
            sessions.add(raw.headers["x-ctxsvc-session-id"])
            message = raw.parse()
        history.append({"role": "assistant", "content": message.content})
        results = [
            {"type": "tool_result", "tool_use_id": block.id, "content": files[block.input["path"]]}
            for block in message.content
            if block.type == "tool_use"
        ]
        if results:
            assert message.stop_reason == "tool_use"
            history.append({"role": "user", "content": results})
    final = history[-1]["content"]
    assert final[0].text == "a.py prints hello, b.py prints bye."
    (sid,) = sessions
    rows = stored(server, sid)
    assert [m["role"] for m in rows] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert rows[2]["content"][0]["output"] == [{"type": "text", "text": "print('hello')"}]
    assert json.loads(rows[1]["content"][0]["input"]) == {"path": "a.py"}
    # The provider got each result once, after its call.
    sent = [m["role"] for m in script.bodies[-1]["messages"]]
    assert sent == ["system", "user", "assistant", "tool", "assistant", "tool"]


def test_a_request_it_cannot_hold_is_the_sdks_bad_request_and_nothing_is_called(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, _ = fake
    model = register(server, provider)
    client = sdk(server, request)
    before = len(provider.requests)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model=model,
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "unsupported_tool"
    assert len(provider.requests) == before
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(
            model="no-such-model", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    assert isinstance(missing.value.body, dict)
    assert missing.value.body["error"]["type"] == "not_found_error"


def test_signed_thinking_reaches_an_anthropic_provider_again_on_the_next_round(
    server: ServerProcess, request: pytest.FixtureRequest
) -> None:
    """Behind the endpoint an Anthropic model with extended thinking: the SDK gets the signed
    thinking block, sends it back unchanged with the tool result, and the provider's next
    request holds it as the API requires; the cache figures pass through as Anthropic's."""
    with FakeProviderServer() as provider:
        body = {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "anthropic_messages",
                "base_url": provider.base_url,
                "model_name": "claude-fake",
                "api_key_env": KEY_ENV,
            },
        }
        model = "fake-claude-thinking"
        response = httpx.put(f"{server.url}/v1/models/{model}", json=body, timeout=30)
        assert response.status_code in (200, 201), response.text
        provider.enqueue(
            StreamReply(
                anthropic_stream(
                    thinking=["Need ", "the file."],
                    signature="sig-xyz",
                    text=["Reading."],
                    tool_uses=[FakeToolUse("toolu_1", "read", ['{"path":', '"a.py"}'])],
                    stop_reason="tool_use",
                    input_tokens=200,
                    cache_creation=1500,
                )
            ),
            StreamReply(
                anthropic_stream(text=["It prints ", "hello."], input_tokens=300, cache_read=1500)
            ),
        )
        client = sdk(server, request)
        history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
        ask: dict[str, Any] = {"model": model, "max_tokens": 500, "tools": TOOLS}
        with client.messages.stream(**ask, messages=history) as stream:
            first = stream.get_final_message()
        thinking, text, call = first.content
        assert thinking.type == "thinking"
        assert (thinking.thinking, thinking.signature) == ("Need the file.", "sig-xyz")
        assert text.type == "text"
        assert call.type == "tool_use"
        assert call.input == {"path": "a.py"}
        assert first.usage.cache_creation_input_tokens == 1500
        assert first.usage.input_tokens == 200

        history += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hi"}],
            },
        ]
        second = client.messages.create(**ask, messages=history)
        assert second.content[0].type == "text"
        assert second.content[0].text == "It prints hello."
        assert second.usage.cache_read_input_tokens == 1500
        assert second.usage.input_tokens == 300
        sent = provider.requests[-1].json()["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[1]["content"][0] == {
            "type": "thinking",
            "thinking": "Need the file.",
            "signature": "sig-xyz",
        }
        assert sent[1]["content"][2]["input"] == {"path": "a.py"}
