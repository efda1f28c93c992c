"""The answer side of the Anthropic Messages codec: the ``message`` body, its server-sent events
and the error object (``app.api.compat.anthropic_messages`` reads the request)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.api.compat._shared import failure, sse
from app.core.content import compact_json
from app.providers.base import ModelResponse, Usage
from app.providers.encoding.anthropic_messages import message_blocks
from app.services.proxy.contract import AnswerEvent, Completed, ReasoningDelta, TextDelta

__all__ = ["answer_blocks", "error_body", "message_body", "message_events", "stop_reason", "usage"]

_STOP_REASON = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    "other": "end_turn",
}
# The error types of Anthropic's "Errors" page, by status; other 4xx / 5xx take the family's.
_ERROR_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def message_body(response: ModelResponse, *, model: str, response_id: str) -> dict[str, Any]:
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": answer_blocks(response),
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": usage(response.usage),
    }


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPE.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    # ``code`` is ours (the SDK keeps the whole body on its exception): the stable name a
    # caller can branch on, where Anthropic's ``type`` is only the family.
    return {"type": "error", "error": {"type": kind, "message": message, "code": code}}


def answer_blocks(response: ModelResponse) -> list[dict[str, Any]]:
    """The answer's content blocks, in the order the API sends them."""
    _, blocks = message_blocks({"role": "assistant", "content": response.assistant_content()})
    if response.thinking and not any(b["type"] == "thinking" for b in blocks):
        blocks.insert(0, {"type": "thinking", "thinking": response.thinking, "signature": ""})
    return blocks


def stop_reason(response: ModelResponse) -> str:
    if response.tool_calls:
        return "tool_use"
    return _STOP_REASON[response.finish_reason]


def usage(figures: Usage) -> dict[str, int]:
    """Anthropic's usage: its ``input_tokens`` leaves out the cached part, which ours holds."""
    read = figures.cached_tokens or 0
    written = figures.cache_creation_tokens or 0
    return {
        "input_tokens": max(0, (figures.input_tokens or 0) - read - written),
        "output_tokens": figures.output_tokens or 0,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }


async def message_events(
    events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
) -> AsyncIterator[bytes]:
    start: dict[str, Any] = {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    yield sse("message_start", {"type": "message_start", "message": start})
    blocks = _BlockStream()
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                for chunk in blocks.delta("text", {"type": "text_delta", "text": event.text}):
                    yield chunk
            elif isinstance(event, ReasoningDelta):
                delta = {"type": "thinking_delta", "thinking": event.text}
                for chunk in blocks.delta("thinking", delta):
                    yield chunk
            elif isinstance(event, Completed):
                for chunk in blocks.finish(event.response):
                    yield chunk
                return
        raise RuntimeError("the answer's events ended before it completed")
    except Exception as exc:  # every failure becomes the protocol's error event
        status, code, message = failure(exc)
        yield sse("error", error_body(status, code, message))


class _BlockStream:
    """The content blocks of a streamed answer: opened as deltas arrive, finished by the
    completed answer (which alone carries signatures and tool calls)."""

    def __init__(self) -> None:
        self._count = 0
        self._open: dict[str, int] = {}  # "text" / "thinking" → index
        self._streamed: set[str] = set()

    def _start(self, block: dict[str, Any]) -> tuple[int, bytes]:
        index = self._count
        self._count += 1
        payload = {"type": "content_block_start", "index": index, "content_block": block}
        return index, sse("content_block_start", payload)

    def _stop(self, index: int) -> bytes:
        return sse("content_block_stop", {"type": "content_block_stop", "index": index})

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        return sse("content_block_delta", payload)

    def delta(self, kind: str, delta: dict[str, Any]) -> list[bytes]:
        """A text or thinking delta; its block opens with the first one and stays open until
        the answer completes (a thinking block's signature comes with the answer)."""
        out: list[bytes] = []
        if kind not in self._open:
            empty: dict[str, Any] = {"type": "text", "text": ""}
            if kind == "thinking":
                empty = {"type": "thinking", "thinking": "", "signature": ""}
            index, chunk = self._start(empty)
            self._open[kind] = index
            self._streamed.add(kind)
            out.append(chunk)
        out.append(self._delta(self._open[kind], delta))
        return out

    def finish(self, response: ModelResponse) -> list[bytes]:
        out: list[bytes] = []
        whole = answer_blocks(response)
        signed = [b for b in whole if b["type"] == "thinking" and b["signature"]]
        if "thinking" in self._open:
            index = self._open.pop("thinking")
            if len(signed) == 1:
                signature = {"type": "signature_delta", "signature": signed[0]["signature"]}
                out.append(self._delta(index, signature))
            out.append(self._stop(index))
        if "text" in self._open:
            out.append(self._stop(self._open.pop("text")))
        for block in whole:
            kind = block["type"]
            if kind in ("text", "thinking") and kind in self._streamed:
                continue
            if kind == "tool_use":
                out.extend(self._tool_use(block))
            else:
                index, chunk = self._start(block)
                out.extend([chunk, self._stop(index)])
        delta = {"stop_reason": stop_reason(response), "stop_sequence": None}
        payload = {"type": "message_delta", "delta": delta, "usage": usage(response.usage)}
        out.append(sse("message_delta", payload))
        out.append(sse("message_stop", {"type": "message_stop"}))
        return out

    def _tool_use(self, block: dict[str, Any]) -> list[bytes]:
        index, start = self._start({**block, "input": {}})
        delta = {"type": "input_json_delta", "partial_json": compact_json(block["input"])}
        return [start, self._delta(index, delta), self._stop(index)]
