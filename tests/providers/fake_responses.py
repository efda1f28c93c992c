"""Wire-format builders for the fake provider speaking OpenAI Responses: the response object
(``responses_object``, what ``POST /v1/responses`` answers without ``stream``) and the typed
server-sent events of a streamed one (``responses_stream``), as the API and the ``openai`` SDK's
types describe them. Both are built from the same output items, so a test can ask for either.
Errors use the OpenAI error body (``openai_error``); ``responses_error_event`` is the ``error``
event a stream may end with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.providers.fake_wire import SSE

__all__ = [
    "FakeFunctionCall",
    "FakeReasoning",
    "ResponsesPrefixCache",
    "responses_error_event",
    "responses_object",
    "responses_output",
    "responses_stream",
    "responses_usage",
]

_CREATED = 1700000000


@dataclass(frozen=True)
class FakeFunctionCall:
    call_id: str
    name: str
    argument_chunks: Sequence[str] = ()


@dataclass(frozen=True)
class FakeReasoning:
    id: str
    summary: Sequence[str] = ()
    encrypted_content: str | None = None


def responses_usage(
    input_tokens: int,
    output_tokens: int,
    *,
    cached: int = 0,
    cache_write: int = 0,
    reasoning: int = 0,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def responses_output(
    *,
    text: Sequence[str] = (),
    reasoning: Sequence[FakeReasoning] = (),
    function_calls: Sequence[FakeFunctionCall] = (),
) -> list[dict[str, Any]]:
    """The output items, in the order a model produces them: reasoning, message, calls."""
    items: list[dict[str, Any]] = []
    for r in reasoning:
        item: dict[str, Any] = {
            "id": r.id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": piece} for piece in r.summary],
        }
        if r.encrypted_content is not None:
            item["encrypted_content"] = r.encrypted_content
        items.append(item)
    if text:
        items.append(
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "".join(text), "annotations": []}],
            }
        )
    for call in function_calls:
        items.append(
            {
                "id": f"fc_{call.call_id}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": "".join(call.argument_chunks),
            }
        )
    return items


def responses_object(
    output: Sequence[Mapping[str, Any]],
    *,
    status: str = "completed",
    usage: Mapping[str, Any] | None = None,
    incomplete_reason: str | None = None,
    error: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
) -> dict[str, Any]:
    """A whole response object (``openai.types.responses.Response`` validates it)."""
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": _CREATED,
        "status": status,
        "error": dict(error) if error is not None else None,
        "incomplete_details": (
            {"reason": incomplete_reason} if incomplete_reason is not None else None
        ),
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": dict(usage) if usage is not None else None,
        "metadata": {},
    }


def _event(kind: str, number: int, **fields: Any) -> SSE:
    payload = {"type": kind, "sequence_number": number, **fields}
    return SSE(json.dumps(payload, separators=(",", ":")), kind)


def responses_stream(
    *,
    text: Sequence[str] = (),
    reasoning: Sequence[FakeReasoning] = (),
    function_calls: Sequence[FakeFunctionCall] = (),
    usage: Mapping[str, Any] | None = None,
    status: str = "completed",
    incomplete_reason: str | None = None,
    error: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    terminal: bool = True,
) -> list[SSE]:
    """A streamed response: created, each output item added, its deltas (text and summary one
    event per piece, arguments one event per chunk), done; then the terminal event of
    ``status`` with the whole response (left out with ``terminal=False``: a cut stream)."""
    items = responses_output(text=text, reasoning=reasoning, function_calls=function_calls)
    whole = responses_object(
        items,
        status=status,
        usage=usage,
        incomplete_reason=incomplete_reason,
        error=error,
        model=model,
    )
    pending = {**whole, "status": "in_progress", "output": [], "usage": None}
    events = [_event("response.created", 0, response=pending)]
    events.append(_event("response.in_progress", len(events), response=pending))
    for index, item in enumerate(items):
        started = {**item, "status": "in_progress"} if "status" in item else dict(item)
        if item["type"] == "message":
            started["content"] = []
        if item["type"] == "function_call":
            started["arguments"] = ""
        events.append(
            _event("response.output_item.added", len(events), output_index=index, item=started)
        )
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            for piece in text:
                events.append(
                    _event(
                        "response.output_text.delta",
                        len(events),
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                        **where,
                    )
                )
        elif item["type"] == "reasoning":
            pieces = next(r.summary for r in reasoning if r.id == item["id"])
            for summary_index, piece in enumerate(pieces):
                events.append(
                    _event(
                        "response.reasoning_summary_text.delta",
                        len(events),
                        summary_index=summary_index,
                        delta=piece,
                        **where,
                    )
                )
        elif item["type"] == "function_call":
            chunks = next(c.argument_chunks for c in function_calls if c.call_id == item["call_id"])
            for chunk in chunks:
                events.append(
                    _event(
                        "response.function_call_arguments.delta", len(events), delta=chunk, **where
                    )
                )
            events.append(
                _event(
                    "response.function_call_arguments.done",
                    len(events),
                    arguments=item["arguments"],
                    name=item["name"],
                    **where,
                )
            )
        events.append(
            _event("response.output_item.done", len(events), output_index=index, item=item)
        )
    if terminal:
        kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(
            status, "response.completed"
        )
        events.append(_event(kind, len(events), response=whole))
    return events


def responses_error_event(message: str, *, code: str | None = None) -> SSE:
    """The ``error`` event a stream may carry instead of its terminal event."""
    payload = {"type": "error", "code": code, "message": message, "param": None}
    return SSE(json.dumps(payload, separators=(",", ":")), "error")


class ResponsesPrefixCache:
    """The prompt cache a Responses fake reports, as OpenAI documents its automatic caching:
    a request reads the longest prefix of its input that an earlier request with the same
    ``prompt_cache_key`` (or none) sent, once that prefix is at least 1024 tokens, in steps of
    128 tokens. Tokens: ⌈UTF-8 bytes of each input item's compact JSON ÷ 4⌉, the instructions
    and tools first (a deterministic stand-in for the provider's tokenizer)."""

    MIN_TOKENS = 1024
    STEP = 128

    def __init__(self) -> None:
        self._seen: dict[str | None, list[list[str]]] = {}

    def observe(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(input tokens, cached tokens) of ``body``; remembers it for later requests."""
        units = [json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)]
        units += [json.dumps(item, sort_keys=True) for item in body.get("input") or []]
        sizes = [max(1, -(-len(unit.encode()) // 4)) for unit in units]
        earlier = self._seen.setdefault(body.get("prompt_cache_key"), [])
        shared = 0
        for previous in earlier:
            same = 0
            while same < min(len(previous), len(units)) and previous[same] == units[same]:
                same += 1
            shared = max(shared, same)
        earlier.append(units)
        read = sum(sizes[:shared])
        cached = read - read % self.STEP if read >= self.MIN_TOKENS else 0
        return sum(sizes), cached
