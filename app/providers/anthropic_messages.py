"""Anthropic Messages adapter (streaming).

Wire format (Anthropic API reference "Messages", "Streaming messages", "Errors", "Extended
thinking", consulted 2026-11-30): ``POST {base_url}/v1/messages`` with ``x-api-key`` and
``anthropic-version: 2023-06-01``; events ``message_start`` (usage with ``input_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``), ``content_block_start`` (``text``,
``tool_use {id, name, input:{}}``, ``thinking``, ``redacted_thinking``), ``content_block_delta``
(``text_delta``, ``input_json_delta.partial_json``, ``thinking_delta``, ``signature_delta``),
``content_block_stop``, ``message_delta`` (``stop_reason``, cumulative ``usage``),
``message_stop``, ``ping``, and ``error`` (e.g. ``overloaded_error`` mid-stream). New event
types may appear (versioning policy): unknown ones are ignored. HTTP errors:
``{"type":"error","error":{"type","message"}}``; 529 ``overloaded_error``; an overflow is an
``invalid_request_error`` whose message says "prompt is too long" (there is no code for it, so
this adapter — and only it — reads that message). ``base_url`` excludes the version, e.g.
``https://api.anthropic.com``.

Thinking is echoed on later calls only with its signature, so a signed thinking block also
becomes a ``provider_opaque`` block of driver ``anthropic`` (format in
``app.providers.encoding.anthropic_messages``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import ProviderOpaqueBlock, ToolCallBlock, compact_json
from app.providers._errors import ErrorBody, parse_error_body, retry_after_seconds
from app.providers._streaming import (
    Assembler,
    StreamingClient,
    StreamState,
    protocol_error,
)
from app.providers.base import FinishReason, ModelResponse, ProviderError, Usage
from app.providers.encoding.anthropic_messages import opaque_thinking
from app.providers.encoding.wire import anthropic_messages_body
from app.providers.sse import ServerSentEvent

__all__ = ["ANTHROPIC_VERSION", "AnthropicMessagesClient"]

ANTHROPIC_VERSION = "2023-06-01"

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_OVERFLOW_MARK = "prompt is too long"


class AnthropicMessagesClient(StreamingClient):
    """``ModelClient`` for ``kind = anthropic_messages``."""

    def body(self, request: Mapping[str, Any], caching: CachePlan | None = None) -> bytes:
        return anthropic_messages_body(
            request, model=self._config.model_name, stream=True, caching=caching
        )

    def _url(self) -> str:
        return self._config.base_url.rstrip("/") + "/v1/messages"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if api_key is not None:
            headers["x-api-key"] = api_key
        return headers

    def _http_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        return classify_error(
            status, parse_error_body(body), retry_after=retry_after_seconds(headers)
        )

    def _assembler(self, state: StreamState) -> Assembler:
        return _MessagesAssembler(state)

    def _answer_events(self, answer: Any) -> list[ServerSentEvent]:
        return answer_events(answer)


def answer_events(answer: Any) -> list[ServerSentEvent]:
    """A complete ``message`` as the events that would have streamed it: ``message_start``,
    each content block whole in its ``content_block_start`` (and its stop), ``message_delta``
    with the stop reason and usage, ``message_stop``. A ``{"type": "error"}`` object is its
    error event."""
    if not isinstance(answer, dict):
        raise protocol_error("the JSON answer is not an object")
    if answer.get("type") == "error":
        return [ServerSentEvent("error", json.dumps(answer))]
    content = answer.get("content")
    if answer.get("type") != "message" or not isinstance(content, list):
        raise protocol_error("the JSON answer is not a message")
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {**answer, "content": [], "stop_reason": None}})
    ]
    for index, block in enumerate(content):
        events.append(("content_block_start", {"index": index, "content_block": block}))
        events.append(("content_block_stop", {"index": index}))
    delta = {"stop_reason": answer.get("stop_reason"), "stop_sequence": answer.get("stop_sequence")}
    events.append(("message_delta", {"delta": delta, "usage": answer.get("usage")}))
    events.append(("message_stop", {}))
    return [ServerSentEvent(kind, json.dumps({"type": kind, **body})) for kind, body in events]


def classify_error(
    status: int | None,
    error: ErrorBody,
    *,
    retry_after: float | None = None,
    semantic: bool = False,
) -> ProviderError:
    """One Anthropic error (HTTP, or an ``error`` event when ``status`` is None)."""
    where = f"HTTP {status}" if status is not None else "in the stream"
    kind = error.type
    too_long = kind == "invalid_request_error" and _OVERFLOW_MARK in error.message.lower()
    if too_long or kind == "request_too_large" or status == 413:
        return ProviderError.of(
            "context_overflow",
            f"the model's context window cannot hold this request ({where}{error.quoted()})",
            semantic_output_received=semantic,
            status=status,
        )
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return ProviderError.of(
            "auth",
            f"the provider refused the API key ({where}); check the key in the configured "
            "environment variable",
            semantic_output_received=semantic,
            status=status,
        )
    if status == 429 or kind == "rate_limit_error":
        return ProviderError.of(
            "rate_limited",
            f"the provider is rate limiting this key ({where}{error.quoted()})",
            semantic_output_received=semantic,
            retryable=True,
            retry_after=retry_after,
            status=status,
        )
    server_kinds = ("api_error", "overloaded_error", "timeout_error")
    if kind in server_kinds or (status is not None and (status in (408, 409) or status >= 500)):
        return ProviderError.of(
            "server_error",
            f"the provider failed ({where}{error.quoted()}); retry later",
            semantic_output_received=semantic,
            retryable=True,
            retry_after=retry_after,
            status=status,
        )
    if status is None:
        # An unknown error event mid-stream: the stream is unusable, the cause unknown.
        return ProviderError.of(
            "server_error",
            f"the provider stream reported an error ({error.type}{error.quoted()})",
            semantic_output_received=semantic,
            retryable=True,
        )
    return ProviderError.of(
        "bad_request",
        f"the provider refused the request ({where}{error.quoted()}); check the model name "
        "and provider settings",
        semantic_output_received=semantic,
        status=status,
    )


@dataclass(slots=True)
class _Block:
    type: str
    text: list[str] = field(default_factory=list)  # text / thinking / partial_json pieces
    id: str = ""
    name: str = ""
    initial_input: Any = None
    signature: str = ""
    data: str = ""


class _MessagesAssembler:
    def __init__(self, state: StreamState) -> None:
        self._state = state
        self._blocks: dict[int, _Block] = {}
        self._started = False
        self._stop_reason: str | None = None
        self._usage: dict[str, int] = {}

    def _protocol(self, what: str) -> ProviderError:
        return protocol_error(f"malformed messages stream: {what}", self._state)

    async def feed(self, event: ServerSentEvent) -> bool:
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            raise self._protocol(f"the data of a {event.event} event is not JSON") from None
        if not isinstance(payload, dict):
            raise self._protocol("an event is not a JSON object")
        kind = payload.get("type", event.event)
        if kind == "error":
            raise classify_error(None, parse_error_body(payload), semantic=self._state.semantic)
        if kind == "message_start":
            self._started = True
            message = payload.get("message")
            if isinstance(message, dict):
                self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            await self._start_block(payload)
        elif kind == "content_block_delta":
            await self._delta(payload)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            self._merge_usage(payload.get("usage"))
        elif kind == "message_stop":
            return True
        # ping, content_block_stop and future event types carry nothing to assemble.
        return False

    async def _start_block(self, payload: dict[str, Any]) -> None:
        index, block = payload.get("index"), payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise self._protocol("content_block_start without index or content_block")
        if not self._started:
            raise self._protocol("content_block_start before message_start")
        entry = _Block(type=str(block.get("type")))
        self._blocks[index] = entry
        if entry.type == "text":
            await self._text(entry, block.get("text"))
        elif entry.type == "thinking":
            await self._thinking(entry, block.get("thinking"))
            if isinstance(block.get("signature"), str):
                entry.signature = block["signature"]
        elif entry.type == "redacted_thinking":
            entry.data = block["data"] if isinstance(block.get("data"), str) else ""
        elif entry.type == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise self._protocol("tool_use block without id or name")
            entry.id, entry.name = block["id"], block["name"]
            entry.initial_input = block.get("input")
            self._state.tool_call_output()

    async def _delta(self, payload: dict[str, Any]) -> None:
        index, delta = payload.get("index"), payload.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            raise self._protocol("content_block_delta without index or delta")
        entry = self._blocks.get(index)
        if entry is None:
            raise self._protocol(f"content_block_delta for unknown block {index}")
        kind = delta.get("type")
        if kind == "text_delta" and entry.type == "text":
            await self._text(entry, delta.get("text"))
        elif kind == "thinking_delta" and entry.type == "thinking":
            await self._thinking(entry, delta.get("thinking"))
        elif kind == "signature_delta" and entry.type == "thinking":
            if isinstance(delta.get("signature"), str):
                entry.signature += delta["signature"]
        elif kind == "input_json_delta" and entry.type == "tool_use":
            if isinstance(delta.get("partial_json"), str):
                entry.text.append(delta["partial_json"])
                self._state.tool_call_output()
        elif kind in ("text_delta", "thinking_delta", "signature_delta", "input_json_delta"):
            raise self._protocol(f"{kind} for a {entry.type} block")

    async def _text(self, entry: _Block, text: Any) -> None:
        if isinstance(text, str) and text:
            entry.text.append(text)
            await self._state.text(text)

    async def _thinking(self, entry: _Block, text: Any) -> None:
        if isinstance(text, str) and text:
            entry.text.append(text)
            await self._state.reasoning(text)

    def _merge_usage(self, usage: Any) -> None:
        # message_delta figures are cumulative: a later value replaces an earlier one.
        if isinstance(usage, dict):
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._usage[key] = value

    def finish(self) -> ModelResponse:
        if self._stop_reason is None:
            raise self._protocol("the stream ended without a stop_reason")
        ordered = [self._blocks[i] for i in sorted(self._blocks)]
        return ModelResponse(
            text="".join("".join(b.text) for b in ordered if b.type == "text"),
            thinking="".join("".join(b.text) for b in ordered if b.type == "thinking"),
            provider_opaque=_opaque_blocks(ordered),
            tool_calls=[_tool_call(b) for b in ordered if b.type == "tool_use"],
            finish_reason=_STOP.get(self._stop_reason, "other"),
            usage=self._final_usage(),
            raw_finish_reason=self._stop_reason,
        )

    def _final_usage(self) -> Usage:
        usage = self._usage
        # Anthropic's input_tokens excludes cache reads and writes; the prompt is all three.
        base = usage.get("input_tokens")
        total = None
        if base is not None:
            total = (
                base
                + usage.get("cache_read_input_tokens", 0)
                + usage.get("cache_creation_input_tokens", 0)
            )
        return Usage(
            input_tokens=total,
            output_tokens=usage.get("output_tokens"),
            cached_tokens=usage.get("cache_read_input_tokens"),
            reasoning_tokens=None,
            cache_creation_tokens=usage.get("cache_creation_input_tokens"),
        )


def _tool_call(block: _Block) -> ToolCallBlock:
    raw = "".join(block.text)
    if not raw:
        # No input_json_delta: the start event's input (``{}`` for a call without arguments).
        initial = block.initial_input if isinstance(block.initial_input, dict) else {}
        raw = compact_json(initial)
    return {"type": "tool_call", "id": block.id, "name": block.name, "input": raw}


def _opaque_blocks(blocks: list[_Block]) -> list[ProviderOpaqueBlock]:
    """Signed thinking and redacted thinking, in response order, for echoing back."""
    return opaque_thinking(
        [
            {"type": b.type, "thinking": "".join(b.text), "signature": b.signature, "data": b.data}
            for b in blocks
            if b.type in ("thinking", "redacted_thinking")
        ]
    )
