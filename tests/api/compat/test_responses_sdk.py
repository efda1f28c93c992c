"""The official ``openai`` SDK parses what the OpenAI Responses codec renders, over real HTTP on
loopback (``CodecServer``): whole responses, event streams, errors; and the items it sends back
read as the very answer the service stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from app.api.compat.openai_responses import CODEC
from app.providers.base import ModelResponse, ProviderError, Usage
from app.services.proxy.contract import ReasoningDelta, TextDelta
from tests.api.compat.codec_server import Answer, CodecServer

TOOL = {
    "type": "function",
    "name": "lookup",
    "description": "Look a word up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "strict": False,
}
REASONING = {
    "id": "rs_9",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Look it up."}],
    "encrypted_content": "gAAA-opaque",
}
CALLING = ModelResponse(
    text="Let me check.",
    thinking="Look it up.",
    provider_opaque=[
        {
            "type": "provider_opaque",
            "driver": "openai_responses",
            "kind": "reasoning",
            "payload": REASONING,
        }
    ],
    tool_calls=[{"type": "tool_call", "id": "call_1", "name": "lookup", "input": '{"q": "ère"}'}],
    finish_reason="tool_calls",
    usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=1000, reasoning_tokens=12),
)
PLAIN = ModelResponse(
    text="A vowel.", usage=Usage(input_tokens=10, output_tokens=4), finish_reason="stop"
)


@pytest.fixture
def server() -> Iterator[CodecServer]:
    with CodecServer(CODEC) as running:
        yield running


@pytest.fixture
def client(server: CodecServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def ask(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "input": "Define ère.",
        "instructions": "Be brief.",
        "tools": [TOOL],
        "store": False,
        **extra,
    }


def test_a_whole_response_parses_with_text_calls_and_cached_tokens(
    server: CodecServer, client: openai.OpenAI
) -> None:
    server.enqueue(Answer(CALLING, response_id="resp_a1"))
    response = client.responses.create(**ask())
    assert response.id == "resp_a1"
    assert response.status == "completed"
    assert response.output_text == "Let me check."
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    call = response.output[2]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_1", "lookup", '{"q": "ère"}')
    usage = response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (1200, 40, 1240)
    assert usage.input_tokens_details.cached_tokens == 1000
    assert usage.output_tokens_details.reasoning_tokens == 12
    assert server.requests[0].system == "Be brief."


def test_a_stream_numbers_its_events_and_ends_in_the_whole_response(
    server: CodecServer, client: openai.OpenAI
) -> None:
    deltas = [ReasoningDelta("Look"), TextDelta("Let me "), TextDelta("check.")]
    server.enqueue(
        Answer(CALLING, response_id="resp_a1"), Answer(CALLING, deltas, response_id="resp_a1")
    )
    whole = client.responses.create(**ask())
    events = list(client.responses.create(**ask(stream=True)))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Let me check."
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.model_dump(exclude={"created_at"}) == whole.model_dump(
        exclude={"created_at"}
    )


def test_the_sdks_stream_helper_accumulates_the_same_response(
    server: CodecServer, client: openai.OpenAI
) -> None:
    deltas = [TextDelta("Let me "), TextDelta("check.")]
    server.enqueue(Answer(CALLING, deltas), Answer(PLAIN))
    with client.responses.stream(**ask()) as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert texts == ["Let me ", "check."]
    assert final.output_text == "Let me check."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments) for c in calls] == [("call_1", '{"q": "ère"}')]
    # A response whose text came whole (no delta) streams it too.
    with client.responses.stream(**ask()) as stream:
        assert stream.get_final_response().output_text == "A vowel."


def test_the_items_the_sdk_sends_back_read_as_the_stored_answer(
    server: CodecServer, client: openai.OpenAI
) -> None:
    server.enqueue(Answer(CALLING, [TextDelta("Let me check.")]), Answer(PLAIN))
    with client.responses.stream(**ask()) as stream:
        first = stream.get_final_response()
    history: list[Any] = [{"role": "user", "content": "Define ère."}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": "call_1", "output": "a vowel"})
    second = client.responses.create(**ask(input=history))
    assert second.output_text == "A vowel."
    sent = server.requests[-1]
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert sent.messages[1].content == CALLING.assistant_content()


def test_an_answer_cut_at_its_limit_is_incomplete(
    server: CodecServer, client: openai.OpenAI
) -> None:
    cut = ModelResponse(text="Partial", finish_reason="length")
    server.enqueue(Answer(cut), Answer(cut, [TextDelta("Partial")]))
    whole = client.responses.create(**ask())
    assert whole.status == "incomplete"
    assert whole.incomplete_details is not None
    assert whole.incomplete_details.reason == "max_output_tokens"
    events = list(client.responses.create(**ask(stream=True)))
    assert events[-1].type == "response.incomplete"


def test_a_failure_mid_stream_is_an_error_event_then_a_failed_response(
    server: CodecServer, client: openai.OpenAI
) -> None:
    failure = ProviderError.of("rate_limited", "the provider is rate limiting this key")
    server.enqueue(Answer(PLAIN, [TextDelta("A")], fail=failure))
    events = list(client.responses.create(**ask(stream=True)))
    error, failed = events[-2], events[-1]
    assert error.type == "error"
    assert (error.code, error.message) == ("rate_limited", "the provider is rate limiting this key")
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error is not None
    assert failed.response.error.code == "rate_limited"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_previous_response_id_is_the_sdks_error_with_our_code(
    server: CodecServer, client: openai.OpenAI
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.responses.create(**ask(previous_response_id="resp_earlier"))
    assert caught.value.code == "previous_response_id_unsupported"
    assert "previous_response_id" in caught.value.message
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (413, "invalid_request_error"),
        (429, "rate_limit_error"),
        (502, "server_error"),
    ],
)
def test_error_types_follow_the_status_family(status: int, kind: str) -> None:
    assert CODEC.render_error(status, "a_code", "m") == {
        "error": {"message": "m", "type": kind, "param": None, "code": "a_code"}
    }
