"""Wire-format builders for the fake providers: SSE events and error bodies as the real APIs
send them (OpenAI chat completion chunks; Anthropic message stream events)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SSE",
    "BodyReply",
    "ErrorReply",
    "FakeToolCall",
    "FakeToolUse",
    "Reply",
    "StreamReply",
    "anthropic_error",
    "anthropic_error_event",
    "anthropic_message",
    "anthropic_stream",
    "openai_completion",
    "openai_error",
    "openai_error_chunk",
    "openai_stream",
    "openai_usage",
]


@dataclass(frozen=True)
class SSE:
    data: str
    event: str | None = None

    def encode(self) -> bytes:
        lines = [f"event: {self.event}"] if self.event else []
        lines += [f"data: {line}" for line in self.data.split("\n")]
        return ("\n".join(lines) + "\n\n").encode()


@dataclass(frozen=True)
class StreamReply:
    events: Sequence[SSE]
    first_byte_delay: float = 0.0
    event_delay: float = 0.0
    drop_after: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorReply:
    status: int
    body: Any = None  # dict → JSON; str → sent as is
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class BodyReply:
    """A whole (not streamed) body: a complete JSON answer from a server that ignores
    ``stream: true`` (``openai_completion``, ``anthropic_message``), or anything else."""

    body: Any  # dict → JSON; str / bytes → sent as is
    content_type: str = "application/json"
    status: int = 200


Reply = StreamReply | ErrorReply | BodyReply


def _data(payload: Any, event: str | None = None) -> SSE:
    return SSE(json.dumps(payload, separators=(",", ":")), event)


# -- OpenAI Chat Completions ------------------------------------------------------------------


@dataclass(frozen=True)
class FakeToolCall:
    id: str
    name: str
    argument_chunks: Sequence[str] = ()


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None) -> SSE:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return _data(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": choices,
        }
    )


def openai_stream(
    *,
    text: Sequence[str] = (),
    reasoning: Sequence[str] = (),
    tool_calls: Sequence[FakeToolCall] = (),
    finish_reason: str | None = "stop",
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    done: bool = True,
) -> list[SSE]:
    """A streamed chat completion; ``usage`` is the final chunk's usage object (as returned with
    ``stream_options.include_usage``). Tool-call arguments arrive one chunk per piece."""
    events = [_chunk(model, {"role": "assistant", "content": ""})]
    events += [_chunk(model, {"reasoning_content": piece}) for piece in reasoning]
    events += [_chunk(model, {"content": piece}) for piece in text]
    for index, call in enumerate(tool_calls):
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(_chunk(model, {"tool_calls": [first]}))
        for piece in call.argument_chunks:
            fragment = {"index": index, "function": {"arguments": piece}}
            events.append(_chunk(model, {"tool_calls": [fragment]}))
    if finish_reason is not None:
        events.append(_chunk(model, {}, finish_reason))
    if usage is not None:
        usage_chunk = json.loads(_chunk(model, None).data)
        usage_chunk["usage"] = dict(usage)
        events.append(_data(usage_chunk))
    if done:
        events.append(SSE("[DONE]"))
    return events


def openai_completion(
    *,
    text: str | None = None,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    finish_reason: str = "stop",
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
) -> dict[str, Any]:
    """A complete, non-streamed chat completion; ``tool_calls`` are (id, name, arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    return body


def openai_usage(
    prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ErrorReply:
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return ErrorReply(status, body, dict(headers or {}))


def openai_error_chunk(message: str, *, type: str = "server_error", code: str | None = None) -> SSE:
    return _data({"error": {"message": message, "type": type, "param": None, "code": code}})


# -- Anthropic Messages -----------------------------------------------------------------------


@dataclass(frozen=True)
class FakeToolUse:
    id: str
    name: str
    json_chunks: Sequence[str] = ()


@dataclass(frozen=True)
class _Thinking:
    chunks: Sequence[str]
    signature: str | None
    redacted: str | None = None


@dataclass
class _Builder:
    events: list[SSE] = field(default_factory=list)
    index: int = 0

    def add(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append(_data({"type": kind, **payload}, kind))

    def block(self, start: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> None:
        self.add("content_block_start", {"index": self.index, "content_block": start})
        for delta in deltas:
            self.add("content_block_delta", {"index": self.index, "delta": delta})
        self.add("content_block_stop", {"index": self.index})
        self.index += 1


def anthropic_stream(
    *,
    thinking: Sequence[str] = (),
    signature: str | None = None,
    redacted_thinking: str | None = None,
    text: Sequence[str] = (),
    tool_uses: Sequence[FakeToolUse] = (),
    stop_reason: str | None = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int = 0,
    cache_creation: int = 0,
    model: str = "claude-fake",
    stop: bool = True,
) -> list[SSE]:
    """A streamed message: [thinking], [redacted thinking], [text], tool uses, in that order."""
    b = _Builder()
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    b.add("message_start", {"message": message})
    b.add("ping", {})
    if thinking:
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in thinking]
        if signature is not None:
            deltas.append({"type": "signature_delta", "signature": signature})
        b.block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if redacted_thinking is not None:
        b.block({"type": "redacted_thinking", "data": redacted_thinking}, [])
    if text:
        b.block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in text],
        )
    for use in tool_uses:
        b.block(
            {"type": "tool_use", "id": use.id, "name": use.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": piece} for piece in use.json_chunks],
        )
    if stop_reason is not None:
        b.add(
            "message_delta",
            {
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    if stop:
        b.add("message_stop", {})
    return b.events


def anthropic_message(
    *,
    content: Sequence[Mapping[str, Any]],
    stop_reason: str | None = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    model: str = "claude-fake",
) -> dict[str, Any]:
    """A complete, non-streamed Messages response with these content blocks."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(block) for block in content],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_error(
    status: int, type: str, message: str, *, headers: Mapping[str, str] | None = None
) -> ErrorReply:
    body = {"type": "error", "error": {"type": type, "message": message}, "request_id": "req_fake"}
    return ErrorReply(status, body, dict(headers or {}))


def anthropic_error_event(type: str, message: str) -> SSE:
    return _data({"type": "error", "error": {"type": type, "message": message}}, "error")
