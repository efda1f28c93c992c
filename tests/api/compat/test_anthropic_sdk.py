"""The official ``anthropic`` SDK parses what the Anthropic Messages codec renders, over real
HTTP on loopback (``CodecServer``): whole messages, streams, errors; and the history it sends
back reads as the very answer the service stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from app.api.compat.anthropic_messages import CODEC
from app.providers.base import ModelResponse, ProviderError, Usage
from app.services.proxy.contract import ReasoningDelta, TextDelta
from tests.api.compat.codec_server import Answer, CodecServer

TOOL = {
    "name": "lookup",
    "description": "Look a word up.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}
SIGNED = ModelResponse(
    text="Let me check.",
    thinking="The user wants a definition.",
    provider_opaque=[
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"signature": "sig-abc"},
        }
    ],
    tool_calls=[{"type": "tool_call", "id": "toolu_1", "name": "lookup", "input": '{"q":"ère"}'}],
    finish_reason="tool_calls",
    usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=1000, cache_creation_tokens=150),
)
PLAIN = ModelResponse(
    text="A short answer.", usage=Usage(input_tokens=10, output_tokens=4), finish_reason="stop"
)


@pytest.fixture
def server() -> Iterator[CodecServer]:
    with CodecServer(CODEC) as running:
        yield running


@pytest.fixture
def client(server: CodecServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="test-key", max_retries=0)


def ask(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 512,
        "messages": [{"role": "user", "content": "Define ère."}],
        "tools": [TOOL],
        **extra,
    }


def test_a_whole_message_parses_with_tool_input_and_usage_apart_from_the_cache(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(Answer(SIGNED, response_id="msg_01"))
    message = client.messages.create(**ask())
    assert message.id == "msg_01"
    assert message.model == "claude-test"
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, call = message.content
    assert thinking.type == "thinking"
    assert thinking.signature == "sig-abc"
    assert thinking.thinking == "The user wants a definition."
    assert text.type == "text"
    assert text.text == "Let me check."
    assert call.type == "tool_use"
    assert call.input == {"q": "ère"}
    assert call.id == "toolu_1"
    assert message.stop_reason == "tool_use"
    # Anthropic's input_tokens leaves the cache reads and writes out: 1200 - 1000 - 150.
    assert message.usage.input_tokens == 50
    assert message.usage.cache_read_input_tokens == 1000
    assert message.usage.cache_creation_input_tokens == 150
    assert message.usage.output_tokens == 40


def test_a_stream_ends_in_the_same_message_as_the_whole_answer(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    deltas = [
        ReasoningDelta("The user wants "),
        ReasoningDelta("a definition."),
        TextDelta("Let me "),
        TextDelta("check."),
    ]
    server.enqueue(
        Answer(SIGNED, response_id="msg_01"), Answer(SIGNED, deltas, response_id="msg_01")
    )
    whole = client.messages.create(**ask())
    texts: list[str] = []
    with client.messages.stream(**ask()) as stream:
        for text in stream.text_stream:
            texts.append(text)
        final = stream.get_final_message()
    assert texts == ["Let me ", "check."]
    assert final.model_dump() == whole.model_dump()


def test_a_stream_without_deltas_still_delivers_every_block(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(Answer(SIGNED, response_id="msg_01"), Answer(SIGNED, response_id="msg_01"))
    whole = client.messages.create(**ask())
    with client.messages.stream(**ask()) as stream:
        final = stream.get_final_message()
    assert final.model_dump() == whole.model_dump()


def test_the_history_the_sdk_sends_back_reads_as_the_stored_answer(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(Answer(SIGNED, [TextDelta("Let me check.")]), Answer(PLAIN))
    with client.messages.stream(**ask()) as stream:
        first = stream.get_final_message()
    call = first.content[-1]
    assert call.type == "tool_use"
    follow_up = [
        {"role": "user", "content": "Define ère."},
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "a vowel"}],
        },
    ]
    second = client.messages.create(**ask(messages=follow_up))
    assert second.content[0].type == "text"
    assert second.content[0].text == "A short answer."
    sent = server.requests[-1]
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert sent.messages[1].content == SIGNED.assistant_content()
    assert sent.messages[2].content == [
        {
            "type": "tool_result",
            "id": "toolu_1",
            "name": "lookup",
            "output": [{"type": "text", "text": "a vowel"}],
            "state": "success",
        }
    ]


def test_thinking_of_another_provider_comes_back_unsigned_and_unchanged(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    bare = ModelResponse(text="Yes.", thinking="Because.", finish_reason="stop")
    server.enqueue(Answer(bare, [ReasoningDelta("Because."), TextDelta("Yes.")]), Answer(PLAIN))
    with client.messages.stream(**ask()) as stream:
        first = stream.get_final_message()
    assert first.content[0].type == "thinking"
    assert first.content[0].thinking == "Because."
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": first.content}]
    client.messages.create(**ask(messages=[*history, {"role": "user", "content": "ok"}]))
    assert server.requests[-1].messages[1].content == bare.assistant_content()


def test_a_failure_mid_stream_is_the_sdks_error_with_our_code(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    failure = ProviderError.of("server_error", "the provider failed (HTTP 503); retry later")
    server.enqueue(Answer(PLAIN, [TextDelta("A short")], fail=failure))
    with (
        client.messages.stream(**ask()) as stream,
        pytest.raises(anthropic.APIStatusError) as caught,
    ):
        stream.get_final_message()
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"] == {
        "type": "api_error",
        "message": "the provider failed (HTTP 503); retry later",
        "code": "server_error",
    }


def test_a_refused_request_is_the_sdks_error_for_the_status(
    server: CodecServer, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.UnprocessableEntityError) as caught:
        client.messages.create(**ask(max_tokens=0))
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "invalid_max_tokens"
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "authentication_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (409, "invalid_request_error"),
        (502, "api_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_types_follow_anthropics_per_status(status: int, kind: str) -> None:
    assert CODEC.render_error(status, "some_code", "m")["error"]["type"] == kind
