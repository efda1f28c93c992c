"""The OpenAI Chat Completions adapter against a protocol-faithful fake over loopback HTTP."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.providers.base import ProviderConfig, ProviderError, RetryPolicy, Timeouts
from app.providers.encoding import encode_openai_chat
from app.providers.http_client import ProviderHTTP
from app.providers.openai_chat import OpenAIChatClient
from tests.providers.encoding.requests import agent_loop, msg, prepared, text
from tests.providers.fakes import (
    ErrorReply,
    FakeProviderServer,
    FakeToolCall,
    RecordingSink,
    StreamReply,
    openai_error,
    openai_error_chunk,
    openai_stream,
    openai_usage,
)

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05, max_retry_after=1)


def client(
    server: FakeProviderServer,
    http: ProviderHTTP,
    *,
    env: dict[str, str] | None = None,
    retry: RetryPolicy = FAST_RETRY,
    timeouts: Timeouts | None = None,
) -> OpenAIChatClient:
    config = ProviderConfig("openai_chat", server.base_url + "/v1", "gpt-test", "TEST_OPENAI_KEY")
    return OpenAIChatClient(
        http,
        config,
        env={"TEST_OPENAI_KEY": KEY} if env is None else env,
        retry=retry,
        # Generous: a loaded machine must not turn a success into a timeout (the tests of
        # timeouts set their own, far apart from what the fake does).
        timeouts=timeouts or Timeouts(first_byte=10, idle=10, total=30),
    )


def hello() -> dict[str, Any]:
    return prepared(msg("user", text("hello")))


async def test_streams_text_and_reports_usage(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    usage = openai_usage(120, 7, cached=100, reasoning=3)
    fake_server.enqueue(StreamReply(openai_stream(text=["Hel", "lo ", "there"], usage=usage)))
    sink = RecordingSink()
    response = await client(fake_server, http).complete(hello(), sink=sink)
    assert response.text == "Hello there"
    assert response.finish_reason == "stop"
    assert response.tool_calls == []
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 7)
    assert (response.usage.cached_tokens, response.usage.reasoning_tokens) == (100, 3)
    assert sink.events == [("text", "Hel"), ("text", "lo "), ("text", "there")]


async def test_sends_exactly_the_encoded_body_with_bearer_auth(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(text=["ok"])))
    request = agent_loop()
    await client(fake_server, http).complete(request)
    [sent] = fake_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.json() == encode_openai_chat(request, model="gpt-test", stream=True)
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"


async def test_tool_calls_split_mid_string_are_assembled_in_order(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    calls = [
        FakeToolCall("call_a", "read", ['{"pa', 'th": "sr', 'c/ä.py"}']),
        FakeToolCall("call_b", "grep", ['{"pattern":', ' "TODO', '", "n": 3}']),
    ]
    fake_server.enqueue(
        StreamReply(openai_stream(text=["Checking."], tool_calls=calls, finish_reason="tool_calls"))
    )
    response = await client(fake_server, http).complete(hello())
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        {"type": "tool_call", "id": "call_a", "name": "read", "input": '{"path": "src/ä.py"}'},
        {
            "type": "tool_call",
            "id": "call_b",
            "name": "grep",
            "input": '{"pattern": "TODO", "n": 3}',
        },
    ]
    assert [b["type"] for b in response.assistant_content()] == ["text", "tool_call", "tool_call"]


async def test_reasoning_deltas_of_compatible_servers_reach_the_sink(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(reasoning=["think", "ing"], text=["A"])))
    sink = RecordingSink()
    response = await client(fake_server, http).complete(hello(), sink=sink)
    assert response.thinking == "thinking"
    assert sink.events == [("reasoning", "think"), ("reasoning", "ing"), ("text", "A")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("length", "length"), ("content_filter", "content_filter"), ("weird", "other")],
)
async def test_finish_reason_is_normalized(
    fake_server: FakeProviderServer, http: ProviderHTTP, raw: str, expected: str
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(text=["x"], finish_reason=raw)))
    response = await client(fake_server, http).complete(hello())
    assert (response.finish_reason, response.raw_finish_reason) == (expected, raw)


async def test_context_overflow_is_reported_without_retry(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(
            400,
            "This model's maximum context length is 128000 tokens.",
            code="context_length_exceeded",
        )
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "context_overflow"
    assert caught.value.semantic_output_received is False
    assert len(fake_server.requests) == 1


async def test_rejected_key_is_auth_and_never_echoed(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(401, f"Incorrect API key provided: {KEY}.", code="invalid_api_key")
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "auth"
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.detail
    assert len(fake_server.requests) == 1


async def test_missing_key_fails_before_any_request(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http, env={}).complete(hello())
    assert caught.value.code == "auth"
    assert "TEST_OPENAI_KEY" in caught.value.detail
    assert fake_server.requests == []


async def test_429_honours_retry_after_then_succeeds(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(
            429,
            "slow down",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": "0.3"},
        ),
        StreamReply(openai_stream(text=["fine"])),
    )
    started = time.monotonic()
    response = await client(fake_server, http).complete(hello())
    assert response.text == "fine"
    assert time.monotonic() - started >= 0.3
    assert len(fake_server.requests) == 2
    assert fake_server.requests[0].body == fake_server.requests[1].body


async def test_retry_after_beyond_the_cap_is_not_waited_for(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(openai_error(429, "later", headers={"Retry-After": "120"}))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "rate_limited"
    assert caught.value.kind == "rate_limited"
    assert len(fake_server.requests) == 1


async def test_exhausted_quota_is_not_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(429, "quota", type="insufficient_quota", code="insufficient_quota")
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "rate_limited"
    assert len(fake_server.requests) == 1


async def test_500_then_success(fake_server: FakeProviderServer, http: ProviderHTTP) -> None:
    fake_server.enqueue(
        openai_error(500, "boom", type="server_error"), StreamReply(openai_stream(text=["ok"]))
    )
    response = await client(fake_server, http).complete(hello())
    assert response.text == "ok"
    assert len(fake_server.requests) == 2


async def test_gives_up_after_max_attempts(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(*[ErrorReply(503, "unavailable") for _ in range(3)])
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "server_error"
    assert caught.value.status == 503
    assert len(fake_server.requests) == 3


async def test_other_4xx_is_a_bad_request_without_retry(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(404, "The model `gpt-test` does not exist", code="model_not_found")
    )
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "bad_request"
    assert "does not exist" in caught.value.detail
    assert len(fake_server.requests) == 1


async def test_connection_dropped_after_text_is_not_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = openai_stream(text=["partial ", "answer", " never finished"])
    fake_server.enqueue(StreamReply(events, drop_after=3), StreamReply(openai_stream(text=["x"])))
    sink = RecordingSink()
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello(), sink=sink)
    assert caught.value.code == "server_error"
    assert caught.value.semantic_output_received is True
    assert len(fake_server.requests) == 1
    assert sink.events == [("text", "partial "), ("text", "answer"), ("cleared", "")]


async def test_connection_dropped_before_any_text_is_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        StreamReply(openai_stream(text=["a"]), drop_after=1),  # only the role chunk arrives
        StreamReply(openai_stream(text=["second try"])),
    )
    response = await client(fake_server, http).complete(hello())
    assert response.text == "second try"
    assert len(fake_server.requests) == 2


async def test_error_chunk_mid_stream_before_content_is_retried(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        StreamReply([openai_error_chunk("overloaded")]),
        StreamReply(openai_stream(text=["ok"])),
    )
    response = await client(fake_server, http).complete(hello())
    assert response.text == "ok"


async def test_slow_first_byte_times_out(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(text=["late"]), first_byte_delay=60))
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http, timeouts=Timeouts(first_byte=0.2, total=30)).complete(
            hello()
        )
    assert caught.value.code == "timeout"
    assert caught.value.kind == "timeout"
    assert caught.value.semantic_output_received is False
    assert time.monotonic() - started < 20  # gave up long before the answer


async def test_total_budget_covers_a_slow_stream(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    # The first event (text: no leading role chunk) comes at once, the rest a minute apart;
    # the budget ends in between.
    events = openai_stream(text=["a", "b", "c", "d"])[1:]
    fake_server.enqueue(StreamReply(events, event_delay=60))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http, timeouts=Timeouts(first_byte=3, total=3)).complete(hello())
    assert caught.value.code == "timeout"
    assert caught.value.semantic_output_received is True


async def test_stream_without_finish_is_a_protocol_error(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(text=["cut"], finish_reason=None, done=False)))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "protocol"
    assert caught.value.semantic_output_received is True


async def test_non_json_event_is_a_protocol_error(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    from tests.providers.fakes import SSE

    fake_server.enqueue(StreamReply([SSE("{not json")]))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "protocol"
    assert len(fake_server.requests) == 1


async def test_idle_stream_times_out_with_semantic_output(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    # Without the leading role chunk, the first event already carries text.
    events = openai_stream(text=["a", "b"])[1:]
    fake_server.enqueue(StreamReply(events, event_delay=60))
    timeouts = Timeouts(first_byte=10, idle=1, total=30)
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http, timeouts=timeouts).complete(hello())
    assert caught.value.code == "timeout"
    assert caught.value.semantic_output_received is True
    assert len(fake_server.requests) == 1


async def test_a_key_quoted_in_any_error_is_redacted(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(openai_error(400, f"bad header value {KEY}", code="invalid_value"))
    with pytest.raises(ProviderError) as caught:
        await client(fake_server, http).complete(hello())
    assert caught.value.code == "bad_request"
    assert KEY not in str(caught.value)
    assert "[redacted]" in caught.value.detail


async def test_consecutive_calls_reuse_one_connection(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(*(StreamReply(openai_stream(text=[f"answer {i}"])) for i in range(3)))
    adapter = client(fake_server, http)
    for i in range(3):
        assert (await adapter.complete(hello())).text == f"answer {i}"
    # The body is read to its end after [DONE], so the connection goes back to the pool.
    assert fake_server.connections == 1
