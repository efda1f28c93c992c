"""The Chat Completions codec: a request read into the content model (or refused with the
field's code), and an answer written as ``chat.completion`` or its chunk stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api.compat.openai_chat import CODEC
from app.core.errors import InvalidInput
from app.providers.base import ModelResponse, Usage
from app.services.proxy.contract import AnswerEvent, Completed, TextDelta

pytestmark = pytest.mark.anyio

TOOL = {
    "type": "function",
    "function": {"name": "read", "description": "Read.", "parameters": {"type": "object"}},
}


def test_a_request_is_read_into_the_content_model() -> None:
    request = CODEC.decode(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "One."},
                {"role": "developer", "content": [{"type": "text", "text": "Two."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look:"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"p": 1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
            ],
            "tools": [TOOL],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": 64,
            "temperature": 0.2,
        }
    )
    assert request.system == "One.\n\nTwo."
    assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
    assert request.messages[0].content[1] == {
        "type": "data",
        "source": {"source_type": "base64", "data": "AAAA", "media_type": "image/png"},
        "name": None,
    }
    assert request.messages[1].content == [
        {"type": "tool_call", "id": "c1", "name": "read", "input": '{"p": 1}'}
    ]
    assert request.messages[2].content[0]["name"] == "read"  # type: ignore[typeddict-item]
    assert request.tools == [
        {"name": "read", "description": "Read.", "input_schema": {"type": "object"}}
    ]
    assert (request.stream, request.max_output_tokens) == (True, 64)
    assert request.params == {"temperature": 0.2, "stream_options": {"include_usage": True}}
    assert CODEC.includes_usage(request)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "invalid_model"),
        ({"model": "m", "messages": []}, "invalid_messages"),
        ({"model": "m", "messages": [{"role": "system", "content": "x"}]}, "invalid_messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "invalid_messages"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "invalid_messages"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{}]},
            "invalid_tools",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "invalid_max_tokens",
        ),
    ],
)
def test_a_bad_field_is_refused_with_its_code(body: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        CODEC.decode(body)
    assert refused.value.code == code


ANSWER = ModelResponse(
    text="Hi.",
    tool_calls=[{"type": "tool_call", "id": "c2", "name": "read", "input": "{}"}],
    finish_reason="tool_calls",
    usage=Usage(input_tokens=2000, output_tokens=9, cached_tokens=1536),
)


def test_a_whole_answer_is_a_chat_completion() -> None:
    body = CODEC.render(ANSWER, model="m", response_id="r1")
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "read", "arguments": "{}"}
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 1536}
    assert body["usage"]["total_tokens"] == 2009


async def test_a_streamed_answer_is_chunks_then_usage_then_done() -> None:
    async def events() -> AsyncIterator[AnswerEvent]:
        yield TextDelta("Hi")
        yield TextDelta(".")
        yield Completed(ANSWER)

    frames = [
        f
        async for f in CODEC.render_stream_with(
            events(), model="m", response_id="r1", include_usage=True
        )
    ]
    assert frames[-1] == b"data: [DONE]\n\n"
    chunks = [json.loads(f[len(b"data: ") :]) for f in frames[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content", "") for d in deltas) == "Hi."
    assert [d["tool_calls"][0]["id"] for d in deltas if "tool_calls" in d] == ["c2"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 1536


def test_an_error_is_openais_error_object() -> None:
    assert CODEC.render_error(404, "model_not_found", "no model 'x'") == {
        "error": {
            "message": "no model 'x'",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
