"""The OpenAI Responses adapter against the fake provider over loopback HTTP, streaming and not."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from app.providers.base import ProviderConfig, ProviderError, RetryPolicy, Timeouts
from app.providers.encoding import encode_openai_responses
from app.providers.http_client import ProviderHTTP
from app.providers.openai_responses import OpenAIResponsesClient
from tests.providers.encoding.requests import agent_loop, msg, prepared, text
from tests.providers.fake_responses import (
    FakeFunctionCall,
    FakeReasoning,
    responses_error_event,
    responses_object,
    responses_output,
    responses_stream,
    responses_usage,
)
from tests.providers.fakes import (
    BodyReply,
    FakeProviderServer,
    RecordingSink,
    StreamReply,
    openai_error,
)

pytestmark = pytest.mark.anyio

KEY = "sk-test-responses-0123456789"
FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05, max_retry_after=1)


def client(
    server: FakeProviderServer, http: ProviderHTTP, *, reasoning: bool = True
) -> OpenAIResponsesClient:
    config = ProviderConfig(
        "openai_responses", server.base_url + "/v1", "gpt-test", "TEST_KEY", reasoning=reasoning
    )
    return OpenAIResponsesClient(
        http,
        config,
        env={"TEST_KEY": KEY},
        retry=FAST_RETRY,
        timeouts=Timeouts(first_byte=10, idle=10, total=30),
    )


def hello() -> dict[str, Any]:
    return prepared(msg("user", text("hello")))


REASONING = FakeReasoning("rs_1", ["Think", "ing."], encrypted_content="gAAAA-secret")
CALL = FakeFunctionCall("call_7", "read", ['{"path":', '"a.py"}'])


def reply(streaming: bool, **parts: Any) -> StreamReply | BodyReply:
    usage = parts.pop("usage", None)
    if streaming:
        return StreamReply(responses_stream(usage=usage, **parts))
    return BodyReply(responses_object(responses_output(**parts), usage=usage))


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
async def test_text_reasoning_and_usage(
    fake_server: FakeProviderServer, http: ProviderHTTP, streaming: bool
) -> None:
    usage = responses_usage(1200, 40, cached=1024, cache_write=176, reasoning=25)
    fake_server.enqueue(reply(streaming, text=["Hel", "lo"], reasoning=[REASONING], usage=usage))
    sink = RecordingSink()
    response = await client(fake_server, http).complete(hello(), sink=sink)
    assert response.text == "Hello"
    assert response.thinking == "Thinking."
    assert response.finish_reason == "stop"
    usage_got = response.usage
    assert (usage_got.input_tokens, usage_got.output_tokens) == (1200, 40)
    assert (usage_got.cached_tokens, usage_got.reasoning_tokens) == (1024, 25)
    assert usage_got.cache_creation_tokens == 176
    # The reasoning item is kept whole, to be sent back verbatim.
    [opaque] = response.provider_opaque
    assert opaque["driver"] == "openai_responses"
    assert opaque["payload"]["encrypted_content"] == "gAAAA-secret"
    assert opaque["payload"]["id"] == "rs_1"
    assert sink.text == "Hello"
    assert ("reasoning", "Think") in sink.events


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
async def test_function_calls(
    fake_server: FakeProviderServer, http: ProviderHTTP, streaming: bool
) -> None:
    fake_server.enqueue(reply(streaming, text=["Reading."], function_calls=[CALL]))
    response = await client(fake_server, http).complete(hello())
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        {"type": "tool_call", "id": "call_7", "name": "read", "input": '{"path":"a.py"}'}
    ]
    assert response.text == "Reading."


async def test_sends_the_encoded_body_to_responses_with_bearer_auth(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(responses_stream(text=["ok"])))
    request = agent_loop()
    await client(fake_server, http).complete(request)
    [sent] = fake_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.json()
    assert body == encode_openai_responses(request, model="gpt-test", stream=True, reasoning=True)
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])


async def test_a_model_that_does_not_reason_is_not_asked_for_encrypted_reasoning(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(responses_stream(text=["ok"])))
    request = agent_loop()
    await client(fake_server, http, reasoning=False).complete(request)
    [sent] = fake_server.requests
    body = sent.json()
    assert "include" not in body
    assert body == encode_openai_responses(request, model="gpt-test", stream=True)


async def test_a_returned_reasoning_item_goes_back_verbatim(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(responses_stream(reasoning=[REASONING], function_calls=[CALL])))
    fake_server.enqueue(StreamReply(responses_stream(text=["done"])))
    adapter = client(fake_server, http)
    first = await adapter.complete(hello())
    follow_up = prepared(
        msg("user", text("hello")),
        msg("assistant", *first.assistant_content()),
        msg(
            "tool",
            {
                "type": "tool_result",
                "id": "call_7",
                "name": "read",
                "output": [text("x = 1")],
                "state": "success",
            },
        ),
    )
    await adapter.complete(follow_up)
    sent = fake_server.requests[1].json()["input"]
    returned = responses_output(reasoning=[REASONING])[0]
    assert sent[1] == returned
    assert [i["type"] for i in sent] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
async def test_incomplete_for_the_output_limit_is_length(
    fake_server: FakeProviderServer, http: ProviderHTTP, streaming: bool
) -> None:
    if streaming:
        events = responses_stream(
            text=["cut sh"], status="incomplete", incomplete_reason="max_output_tokens"
        )
        fake_server.enqueue(StreamReply(events))
    else:
        body = responses_object(
            responses_output(text=["cut sh"]),
            status="incomplete",
            incomplete_reason="max_output_tokens",
        )
        fake_server.enqueue(BodyReply(body))
    response = await client(fake_server, http).complete(hello())
    assert (response.finish_reason, response.text) == ("length", "cut sh")


async def test_context_overflow_is_mapped(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(400, "Your input exceeds the context window", code="context_length_exceeded")
    )
    with pytest.raises(ProviderError) as failure:
        await client(fake_server, http).complete(hello())
    assert failure.value.code == "context_overflow"
    assert not failure.value.semantic_output_received


async def test_rate_limit_is_retried_then_answered(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        openai_error(429, "slow down", type="requests", code="rate_limit_exceeded"),
        StreamReply(responses_stream(text=["ok"])),
    )
    response = await client(fake_server, http).complete(hello())
    assert response.text == "ok"
    assert len(fake_server.requests) == 2


async def test_a_failed_response_is_an_error_with_its_code(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = responses_stream(
        text=["par"],
        status="failed",
        error={"code": "server_error", "message": "The model failed"},
    )
    fake_server.enqueue(StreamReply(events))
    with pytest.raises(ProviderError) as failure:
        await client(fake_server, http).complete(hello())
    assert failure.value.code == "server_error"
    assert failure.value.semantic_output_received  # text had arrived: never retried
    assert len(fake_server.requests) == 1


async def test_an_error_event_mid_stream(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = responses_stream(terminal=False)
    events.append(responses_error_event("over the limit", code="rate_limit_exceeded"))
    fake_server.enqueue(StreamReply(events))
    fake_server.enqueue(StreamReply(responses_stream(text=["again"])))
    response = await client(fake_server, http).complete(hello())
    assert response.text == "again"  # a rate limit before any output is retried


async def test_a_stream_without_its_terminal_event_is_a_protocol_error(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(responses_stream(text=["half"], terminal=False)))
    with pytest.raises(ProviderError) as failure:
        await client(fake_server, http).complete(hello())
    assert failure.value.code == "protocol"
    assert "response.completed" in failure.value.detail


def test_the_fake_answers_are_responses_by_the_sdk_types() -> None:
    body = responses_object(
        responses_output(text=["hi"], reasoning=[REASONING], function_calls=[CALL]),
        usage=responses_usage(10, 2, cached=0),
    )
    parsed = Response.model_validate(body)
    assert parsed.output_text == "hi"
    assert parsed.usage is not None
    assert parsed.usage.input_tokens_details.cached_tokens == 0


def test_the_fake_stream_events_are_stream_events_by_the_sdk_types() -> None:
    adapter = TypeAdapter(ResponseStreamEvent)
    events = responses_stream(
        text=["a", "b"],
        reasoning=[REASONING],
        function_calls=[CALL],
        usage=responses_usage(10, 2),
    )
    kinds = [adapter.validate_json(event.data).type for event in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds
