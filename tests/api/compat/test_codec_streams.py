"""The codecs' event streams as bytes: the order the protocols fix, and how a stream that fails,
or ends without an answer, ends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from app.api.compat.anthropic_messages import CODEC as ANTHROPIC
from app.api.compat.openai_responses import CODEC as RESPONSES
from app.core.errors import Conflict
from app.providers.base import ModelResponse
from app.services.proxy.contract import AnswerEvent, Codec, Completed, ReasoningDelta, TextDelta

SIGNED_TWICE = ModelResponse(
    text="Done.",
    thinking="ab",
    provider_opaque=[
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"thinking": "a", "signature": "s1"},
        },
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "redacted_thinking",
            "payload": {"data": "opaque"},
        },
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"thinking": "b", "signature": "s2"},
        },
    ],
)


def events_of(
    codec: Codec, script: Sequence[AnswerEvent], fail: Exception | None = None
) -> list[tuple[str, dict[str, Any]]]:
    async def source() -> AsyncIterator[AnswerEvent]:
        for event in script:
            yield event
        if fail is not None:
            raise fail

    async def collect() -> bytes:
        chunks = codec.render_stream(source(), model="m", response_id="resp_1")
        return b"".join([chunk async for chunk in chunks])

    out = []
    for frame in anyio.run(collect).decode().split("\n\n"):
        if frame:
            name, data = frame.split("\n")
            out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_a_signature_closes_its_thinking_block_after_the_text_streamed() -> None:
    signed = ModelResponse(
        text="Hi.",
        thinking="Hm.",
        provider_opaque=[
            {
                "type": "provider_opaque",
                "driver": "anthropic",
                "kind": "thinking",
                "payload": {"signature": "sig"},
            }
        ],
    )
    events = events_of(ANTHROPIC, [ReasoningDelta("Hm."), TextDelta("Hi."), Completed(signed)])
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",  # thinking, 0
        "content_block_delta",
        "content_block_start",  # text, 1
        "content_block_delta",
        "content_block_delta",  # the signature of block 0
        "content_block_stop",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    signature = events[5][1]
    assert signature == {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "sig"},
    }
    assert events[6][1]["index"] == 0


def test_every_signed_and_redacted_thinking_block_is_rendered_in_order() -> None:
    body = ANTHROPIC.render(SIGNED_TWICE, model="m", response_id="msg_1")
    assert body["content"] == [
        {"type": "thinking", "thinking": "a", "signature": "s1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "b", "signature": "s2"},
        {"type": "text", "text": "Done."},
    ]
    streamed = events_of(ANTHROPIC, [Completed(SIGNED_TWICE)])
    started = [data["content_block"] for name, data in streamed if name == "content_block_start"]
    assert started == body["content"]


@pytest.mark.parametrize(
    ("fail", "code"),
    [(Conflict("session_active", "busy"), "session_active"), (None, "internal_error")],
)
def test_an_anthropic_stream_that_fails_or_never_completes_ends_with_an_error_event(
    fail: Exception | None, code: str
) -> None:
    events = events_of(ANTHROPIC, [TextDelta("par")], fail)
    name, data = events[-1]
    assert name == "error"
    assert data["error"]["code"] == code
    assert data["error"]["type"] == ("invalid_request_error" if fail else "api_error")
    assert "message_stop" not in [n for n, _ in events]


@pytest.mark.parametrize(
    ("fail", "code"),
    [(Conflict("session_active", "busy"), "session_active"), (None, "internal_error")],
)
def test_a_responses_stream_that_fails_ends_failed(fail: Exception | None, code: str) -> None:
    events = events_of(RESPONSES, [TextDelta("par")], fail)
    (error_name, error), (failed_name, failed) = events[-2:]
    assert (error_name, error["code"]) == ("error", code)
    assert failed_name == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == code
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
