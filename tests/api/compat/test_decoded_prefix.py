"""A codec that decodes only what a request adds to its conversation's last one
(``app.api.compat._decoded``) gives what decoding the whole request gives: extended, edited,
shortened, with tool results naming calls made earlier, with system messages among them."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.compat.anthropic_messages import AnthropicMessagesCodec
from app.api.compat.openai_chat import OpenAIChatCodec
from app.core.errors import InvalidInput


def anthropic_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "system": "sys", "messages": messages}


def chat_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "messages": messages}


ANTHROPIC_ROUNDS: list[dict[str, Any]] = [
    {"role": "user", "content": "Read a.py"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    {"role": "user", "content": "Thanks"},
]

CHAT_ROUNDS: list[dict[str, Any]] = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "Read a.py"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "x"},
    {"role": "developer", "content": "Be brief."},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Thanks"},
]


@pytest.mark.parametrize(
    ("codec", "body", "rounds"),
    [
        (AnthropicMessagesCodec, anthropic_body, ANTHROPIC_ROUNDS),
        (OpenAIChatCodec, chat_body, CHAT_ROUNDS),
    ],
)
def test_each_request_decodes_as_a_fresh_codec_decodes_it(
    codec: Any, body: Any, rounds: list[dict[str, Any]]
) -> None:
    kept = codec()
    edited = [*rounds[:2], {"role": "user", "content": "edited"}]
    # Growing one message at a time, then an edit, a shorter history, and growing again.
    requests = [rounds[: n + 1] for n in range(len(rounds))]
    requests += [edited, rounds[:2], rounds]
    for messages in requests:
        try:
            fresh = codec().decode(body(messages))
        except InvalidInput:
            with pytest.raises(InvalidInput):
                kept.decode(body(messages))
            continue
        assert kept.decode(body(messages)) == fresh


def test_a_result_names_the_call_an_earlier_request_decoded() -> None:
    codec = AnthropicMessagesCodec()
    first = codec.decode(anthropic_body(ANTHROPIC_ROUNDS[:2]))
    decoded = codec.decode(anthropic_body(ANTHROPIC_ROUNDS[:3]))
    # The messages decoded before are the very objects (only the new one was decoded) ...
    assert decoded.messages[1] is first.messages[1]
    # ... and the result still names the call of the earlier request's messages.
    (result,) = decoded.messages[2].content
    assert result["type"] == "tool_result"
    assert result["name"] == "read"


def test_changing_what_a_request_returned_leaves_the_next_decoding_alone() -> None:
    codec = OpenAIChatCodec()
    first = codec.decode(chat_body(CHAT_ROUNDS[:2]))
    first.messages.clear()
    again = codec.decode(chat_body(CHAT_ROUNDS[:3]))
    assert again == OpenAIChatCodec().decode(chat_body(CHAT_ROUNDS[:3]))
