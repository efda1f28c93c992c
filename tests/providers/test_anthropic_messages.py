"""The Anthropic Messages adapter against a protocol-faithful fake over loopback HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from app.providers.anthropic_messages import AnthropicMessagesClient
from app.providers.base import ProviderConfig, ProviderError, RetryPolicy, Timeouts
from app.providers.encoding import encode_anthropic_messages
from app.providers.http_client import ProviderHTTP
from tests.providers.encoding.requests import agent_loop, msg, prepared, text
from tests.providers.fakes import (
    FakeProviderServer,
    FakeToolUse,
    RecordingSink,
    StreamReply,
    anthropic_error,
    anthropic_error_event,
    anthropic_stream,
)

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-key-0000"


def client(
    server: FakeProviderServer, http: ProviderHTTP, *, env: dict[str, str] | None = None
) -> AnthropicMessagesClient:
    config = ProviderConfig("anthropic_messages", server.base_url, "claude-test", "TEST_ANT_KEY")
    return AnthropicMessagesClient(
        http,
        config,
        env={"TEST_ANT_KEY": KEY} if env is None else env,
        retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05),
        timeouts=Timeouts(first_byte=10, idle=10, total=30),
    )


def hello() -> dict[str, Any]:
    return prepared(msg("user", text("hello")))


async def test_thinking_text_and_split_tool_inputs_are_assembled(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(
        thinking=["Need ", "both files."],
        signature="EqQBCkYIBxgC",
        text=["Reading ", "them."],
        tool_uses=[
            FakeToolUse("toolu_1", "read", ['{"path": "a', '.py"}']),
            FakeToolUse("toolu_2", "read", ['{"pa', 'th": "b.py"', "}"]),
        ],
        stop_reason="tool_use",
        input_tokens=50,
        cache_read=1000,
        cache_creation=20,
        output_tokens=42,
    )
    fake_server.enqueue(StreamReply(events))
    sink = RecordingSink()
    response = await client(fake_server, http).complete(hello(), sink=sink)
    assert response.text == "Reading them."
    assert response.thinking == "Need both files."
    assert response.finish_reason == "tool_calls"
    assert [(c["id"], c["input"]) for c in response.tool_calls] == [
        ("toolu_1", '{"path": "a.py"}'),
        ("toolu_2", '{"path": "b.py"}'),
    ]
    assert response.provider_opaque == [
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"signature": "EqQBCkYIBxgC"},
        }
    ]
    assert (response.usage.input_tokens, response.usage.cached_tokens) == (1070, 1000)
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (42, None)
    assert sink.events == [
        ("reasoning", "Need "),
        ("reasoning", "both files."),
        ("text", "Reading "),
        ("text", "them."),
    ]
    kinds = [b["type"] for b in response.assistant_content()]
    assert kinds == ["thinking", "text", "provider_opaque", "tool_call", "tool_call"]


async def test_signed_thinking_round_trips_into_the_next_request(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(
        thinking=["hmm"], signature="SIG", tool_uses=[FakeToolUse("t1", "read", ["{}"])]
    )
    fake_server.enqueue(StreamReply(events))
    response = await client(fake_server, http).complete(hello())
    follow_up = prepared(
        msg("user", text("hello")), {"role": "assistant", "content": response.assistant_content()}
    )
    assistant = encode_anthropic_messages(follow_up)["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
    ]


async def test_redacted_thinking_is_kept_opaque(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(redacted_thinking="ENCRYPTED", text=["hi"])))
    response = await client(fake_server, http).complete(hello())
    assert response.thinking == ""
    assert response.provider_opaque[0]["kind"] == "redacted_thinking"
    assert response.provider_opaque[0]["payload"] == {"data": "ENCRYPTED"}


async def test_tool_use_without_input_deltas_is_the_empty_object(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        StreamReply(anthropic_stream(tool_uses=[FakeToolUse("t1", "now")], stop_reason="tool_use"))
    )
    response = await client(fake_server, http).complete(hello())
    assert response.tool_calls == [{"type": "tool_call", "id": "t1", "name": "now", "input": "{}"}]


async def test_sends_the_encoded_body_with_key_and_version_headers(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(text=["ok"])))
    request = agent_loop()
    await client(fake_server, http).complete(request)
    [sent] = fake_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.json() == encode_anthropic_messages(request, model="claude-test", stream=True)
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
    ],
)
async def test_stop_reason_is_normalized(
    fake_server: FakeProviderServer, http: ProviderHTTP, stop_reason: str, expected: str
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(text=["x"], stop_reason=stop_reason)))
    response = await client(fake_server, http).complete(hello())
    assert response.finish_reason == expected


async def test_prompt_too_long_is_context_overflow(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        anthropic_error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000")
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "context_overflow"
    assert caught.value.semantic_output_received is False
    assert len(fake_server.requests) == 1


async def test_other_invalid_request_is_bad_request(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        anthropic_error(400, "invalid_request_error", "messages: roles must alternate")
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "bad_request"


async def test_401_is_auth(fake_server: FakeProviderServer, http: ProviderHTTP) -> None:
    fake_server.enqueue(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "auth"
    assert len(fake_server.requests) == 1


async def test_missing_key_fails_before_any_request(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http, env={"TEST_ANT_KEY": "  "}).complete(hello())
    assert caught.value.code == "auth"
    assert fake_server.requests == []


async def test_529_overloaded_then_success(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(429, "rate_limit_error", "slow", headers={"retry-after": "0"}),
        StreamReply(anthropic_stream(text=["third time"])),
    )
    response = await client(fake_server, http).complete(hello())
    assert response.text == "third time"
    assert len(fake_server.requests) == 3


async def test_error_event_after_text_is_not_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(text=["Half an ", "answer"], stop_reason=None, stop=False)
    events.append(anthropic_error_event("overloaded_error", "Overloaded"))
    fake_server.enqueue(StreamReply(events), StreamReply(anthropic_stream(text=["x"])))
    sink = RecordingSink()
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello(), sink=sink)
    assert caught.value.code == "server_error"
    assert caught.value.semantic_output_received is True
    assert len(fake_server.requests) == 1
    assert sink.events[-1] == ("cleared", "")


async def test_error_event_before_content_is_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(stop_reason=None, stop=False)  # message_start and ping only
    events.append(anthropic_error_event("overloaded_error", "Overloaded"))
    fake_server.enqueue(StreamReply(events), StreamReply(anthropic_stream(text=["ok"])))
    sink = RecordingSink()
    response = await client(fake_server, http).complete(hello(), sink=sink)
    assert response.text == "ok"
    assert sink.events == [("text", "ok")]


async def test_dropped_connection_after_tool_input_started_is_semantic(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(tool_uses=[FakeToolUse("t1", "read", ['{"pa', 'th": 1}'])])
    # message_start, ping, content_block_start, first input_json_delta, then the connection dies.
    fake_server.enqueue(StreamReply(events, drop_after=4))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.semantic_output_received is True
    assert len(fake_server.requests) == 1


async def test_stream_without_stop_reason_is_a_protocol_error(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(text=["cut"], stop_reason=None, stop=False)))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "protocol"
    assert caught.value.semantic_output_received is True


async def test_consecutive_calls_reuse_one_connection(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(*(StreamReply(anthropic_stream(text=[f"answer {i}"])) for i in range(3)))
    adapter = client(fake_server, http)
    for i in range(3):
        assert (await adapter.complete(hello())).text == f"answer {i}"
    # The body is read to its end after message_stop, so the connection goes back to the pool.
    assert fake_server.connections == 1
