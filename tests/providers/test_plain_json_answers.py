"""A complete JSON answer where a stream was asked for, and protocol errors that say what came,
for both adapters against the loopback fake.

Some servers ignore ``stream: true`` and answer ``200 application/json`` with the whole response
(LiteLLM's Anthropic mock does); it used to be read as an empty stream ("the stream ended
without a stop_reason").
"""

from __future__ import annotations

from typing import Any

import pytest

from app.providers._streaming import StreamingClient
from app.providers.base import ProviderError
from app.providers.http_client import ProviderHTTP
from tests.providers import test_anthropic_messages as anthropic
from tests.providers import test_openai_chat as openai
from tests.providers.fakes import (
    BodyReply,
    FakeProviderServer,
    RecordingSink,
    StreamReply,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
    openai_usage,
)

pytestmark = pytest.mark.anyio

ADAPTERS = ["openai_chat", "anthropic_messages"]


def adapter(kind: str, server: FakeProviderServer, http: ProviderHTTP) -> StreamingClient:
    return openai.client(server, http) if kind == "openai_chat" else anthropic.client(server, http)


def hello() -> dict[str, Any]:
    return openai.hello()


async def protocol_error(
    kind: str, server: FakeProviderServer, http: ProviderHTTP
) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await adapter(kind, server, http).complete(hello())
    assert caught.value.code == "protocol"
    assert len(server.requests) == 1  # never retried
    return caught.value


async def test_openai_a_complete_json_answer_is_taken(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        BodyReply(
            openai_completion(
                text="Reading it.",
                tool_calls=[("call_1", "read", '{"path": "a.py"}')],
                finish_reason="tool_calls",
                usage=openai_usage(42, 7, cached=40),
            ),
            content_type="application/json; charset=utf-8",
        )
    )
    sink = RecordingSink()
    response = await openai.client(fake_server, http).complete(hello(), sink=sink)
    assert response.text == "Reading it."
    assert sink.text == "Reading it."  # a live listener sees it, in one piece
    assert response.tool_calls == [
        {"type": "tool_call", "id": "call_1", "name": "read", "input": '{"path": "a.py"}'}
    ]
    assert (response.finish_reason, response.raw_finish_reason) == ("tool_calls", "tool_calls")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (42, 7)
    assert response.usage.cached_tokens == 40


async def test_anthropic_a_complete_json_answer_is_taken(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(
        BodyReply(
            anthropic_message(
                content=[
                    {"type": "thinking", "thinking": "Need the file.", "signature": "sig-1"},
                    {"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
                ],
                stop_reason="tool_use",
                input_tokens=30,
                output_tokens=9,
            )
        )
    )
    sink = RecordingSink()
    response = await anthropic.client(fake_server, http).complete(hello(), sink=sink)
    assert (response.thinking, response.text) == ("Need the file.", "Reading it.")
    assert sink.events == [("reasoning", "Need the file."), ("text", "Reading it.")]
    assert response.provider_opaque == [
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"signature": "sig-1"},
        }
    ]
    assert response.tool_calls == [
        {"type": "tool_call", "id": "toolu_1", "name": "read", "input": '{"path":"a"}'}
    ]
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_an_error_object_answered_with_200_is_that_error(
    kind: str, fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    error: dict[str, Any] = {"error": {"type": "overloaded_error", "message": "busy"}}
    if kind == "anthropic_messages":
        error["type"] = "error"
    fake_server.enqueue(BodyReply(error))
    fake_server.enqueue(
        StreamReply(openai_stream(text=["ok"]))
        if kind == "openai_chat"
        else StreamReply(anthropic_stream(text=["ok"]))
    )
    # A server error, retried like one that arrives as an event.
    assert (await adapter(kind, fake_server, http).complete(hello())).text == "ok"
    assert len(fake_server.requests) == 2


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_json_answer_of_another_shape_says_what_it_was(
    kind: str, fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(BodyReply({"status": "queued", "id": "job-7"}))
    error = await protocol_error(kind, fake_server, http)
    assert "the JSON answer is not a" in error.detail
    assert "(received HTTP 200, content type application/json, 35 bytes)" in error.detail
    assert "queued" not in error.detail  # never the bytes of what answered


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_an_answer_that_is_no_stream_says_what_it_was(
    kind: str, fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    page = "<html><body>Service temporarily unavailable" + " " * 300 + "</body></html>"
    fake_server.enqueue(BodyReply(page, content_type="text/html"))
    error = await protocol_error(kind, fake_server, http)
    assert "ended without a" in error.detail
    assert f"(received HTTP 200, content type text/html, {len(page)} bytes)" in error.detail
    assert "html" not in error.detail.replace("text/html", "")  # never the bytes


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_stream_cut_short_says_how_much_came(
    kind: str, fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = (
        openai_stream(text=["cut"], finish_reason=None, done=False)
        if kind == "openai_chat"
        else anthropic_stream(text=["cut"], stop_reason=None, stop=False)
    )
    fake_server.enqueue(StreamReply(events))
    error = await protocol_error(kind, fake_server, http)
    assert "received HTTP 200, content type text/event-stream, " in error.detail
    assert "data:" not in error.detail
    assert error.semantic_output_received is True
