"""The Anthropic Messages codec reads a request into the content model, or refuses it by code."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.compat.anthropic_messages import CODEC, REFUSALS
from app.core.errors import InvalidInput
from app.providers.encoding.anthropic_messages import encode_anthropic_messages

PNG = "iVBORw0KGgo="
PDF = "JVBERi0xLjQK"


def body(**fields: Any) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hi"}],
        **fields,
    }


def refusal(payload: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        CODEC.decode(payload)
    return caught.value


def test_a_whole_conversation_reads_into_the_content_model() -> None:
    assistant = [
        {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "é", "n": 2}},
    ]
    request = CODEC.decode(
        body(
            system=[
                {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Answer in French."},
            ],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {
                            "type": "document",
                            "title": "spec.pdf",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": PDF,
                            },
                        },
                    ],
                },
                {"role": "assistant", "content": assistant},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "tu_1",
                            "content": "no such entry",
                            "is_error": True,
                        },
                        {"type": "text", "text": "Try again."},
                    ],
                },
            ],
            tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
            stream=True,
            temperature=0.2,
            tool_choice={"type": "auto"},
            thinking={"type": "enabled", "budget_tokens": 2048},
        )
    )
    assert request.protocol == "anthropic_messages"
    assert request.model == "claude-x"
    assert request.system == "You are terse.\n\nAnswer in French."
    assert request.stream is True
    assert request.max_output_tokens == 1024
    assert request.tools == [
        {"name": "lookup", "description": "", "input_schema": {"type": "object"}}
    ]
    assert request.params == {
        "temperature": 0.2,
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }
    roles = [m.role for m in request.messages]
    assert roles == ["user", "assistant", "tool", "user"]
    assert request.messages[0].content == [
        {"type": "text", "text": "What is this?"},
        {
            "type": "data",
            "source": {"source_type": "base64", "data": PNG, "media_type": "image/png"},
            "name": None,
        },
        {
            "type": "data",
            "source": {"source_type": "base64", "data": PDF, "media_type": "application/pdf"},
            "name": "spec.pdf",
        },
    ]
    # The assistant turn is what the Anthropic adapter stores for that answer.
    assert request.messages[1].content == [
        {"type": "thinking", "thinking": "Look it up."},
        {"type": "text", "text": "Checking."},
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"signature": "sig-1"},
        },
        {"type": "tool_call", "id": "tu_1", "name": "lookup", "input": '{"q":"é","n":2}'},
    ]
    assert request.messages[2].content == [
        {
            "type": "tool_result",
            "id": "tu_1",
            "name": "lookup",
            "output": [{"type": "text", "text": "no such entry"}],
            "state": "error",
        }
    ]
    assert request.messages[3].content == [{"type": "text", "text": "Try again."}]
    # And the encoding sends the assistant turn and the images back exactly as they came.
    encoded = encode_anthropic_messages(
        {"messages": [{"role": m.role, "content": m.content} for m in request.messages[:2]]}
    )
    assert encoded["messages"][1]["content"] == assistant
    assert encoded["messages"][0]["content"][:2] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]


def test_several_signed_thinking_blocks_and_redacted_thinking_keep_their_signatures() -> None:
    blocks = [
        {"type": "thinking", "thinking": "a", "signature": "s1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "b", "signature": "s2"},
        {"type": "text", "text": "done"},
    ]
    request = CODEC.decode(
        body(messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}])
    )
    encoded = encode_anthropic_messages(
        {"messages": [{"role": m.role, "content": m.content} for m in request.messages]}
    )
    assert encoded["messages"][1]["content"] == blocks


def test_results_split_a_user_turn_in_order_and_a_result_may_hold_images() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
    request = CODEC.decode(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": [image]},
                        {"type": "tool_result", "tool_use_id": "b"},
                        {"type": "text", "text": "and?"},
                    ],
                }
            ]
        )
    )
    assert [m.role for m in request.messages] == ["tool", "tool", "user"]
    first, second = request.messages[0].content[0], request.messages[1].content[0]
    assert first["type"] == "tool_result"
    assert second["type"] == "tool_result"
    assert first["output"] == [
        {
            "type": "data",
            "source": {"source_type": "url", "url": "https://x.test/a.png", "media_type": None},
            "name": None,
        }
    ]
    assert second["output"] == []
    assert second["state"] == "success"


REFUSED: list[tuple[Any, str]] = [
    ([], "invalid_request"),
    (body(model=""), "invalid_model"),
    (body(messages=[]), "invalid_messages"),
    (body(messages=[{"role": "system", "content": "x"}]), "invalid_messages"),
    (body(messages=[{"role": "user", "content": []}]), "invalid_messages"),
    (body(max_tokens=0), "invalid_max_tokens"),
    (body(temperature=1.5), "invalid_sampling"),
    (body(tool_choice={"type": "any", "disable_parallel_tool_use": "yes"}), "invalid_sampling"),
    (body(max_tokens=True), "invalid_max_tokens"),
    (body(stream="yes"), "invalid_request"),
    (body(system=[{"type": "image"}]), "invalid_system"),
    (body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), "unsupported_tool"),
    (body(tools=[{"name": "", "input_schema": {}}]), "invalid_tools"),
    (
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "server_tool_use", "id": "s", "name": "web_search"}],
                },
            ]
        ),
        "unsupported_block",
    ),
    (
        body(messages=[{"role": "user", "content": [{"type": "search_result"}]}]),
        "unsupported_block",
    ),
    (
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}],
                },
            ]
        ),
        "invalid_messages",
    ),
]


@pytest.mark.parametrize(("payload", "code"), REFUSED)
def test_a_request_the_content_model_cannot_hold_is_refused_by_code(
    payload: Any, code: str
) -> None:
    assert refusal(payload).code == code


def test_the_refusal_names_where_the_block_is() -> None:
    error = refusal(body(messages=[{"role": "user", "content": [{"type": "text"}, {}]}]))
    assert error.code == "invalid_messages"
    assert "messages[0].content[0]" in error.detail


def test_max_tokens_boundary_and_absence() -> None:
    assert CODEC.decode(body(max_tokens=1)).max_output_tokens == 1
    without = body()
    del without["max_tokens"]
    assert CODEC.decode(without).max_output_tokens is None


def test_every_code_it_refuses_with_is_listed_for_the_api_description() -> None:
    assert {code for _, code in REFUSED} == set(REFUSALS)


@pytest.mark.parametrize("text", ["Hello.", ""])
def test_plain_string_content_reads_as_its_single_text_block_would(text: str) -> None:
    def messages(content: Any) -> list[Any]:
        return [
            {"role": "user", "content": content},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "next"},
        ]

    as_blocks = [{"type": "text", "text": text}]
    plain = CODEC.decode(body(messages=messages(text))).messages
    assert plain == CODEC.decode(body(messages=messages(as_blocks))).messages
    # An assistant's empty text is no block: nothing of it is stored.
    assert plain[1].content == ([{"type": "text", "text": text}] if text else [])
