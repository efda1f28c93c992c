"""Wire-format builders for the fake provider speaking OpenAI Responses: the response object
(``responses_object``, what ``POST /v1/responses`` answers without ``stream``) and the typed
server-sent events of a streamed one (``responses_stream``), as the API and the ``openai`` SDK's
types describe them. Both are built from the same output items, so a test can ask for either.
Errors use the OpenAI error body (``openai_error``); ``responses_error_event`` is the ``error``
event a stream may end with."""

from __future__ import annotations

import hashlib
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
    """The prompt cache a Responses fake reports, as OpenAI documents its automatic prompt
    caching (platform.openai.com/docs/guides/prompt-caching): requests with the same
    ``prompt_cache_key`` (or none) share a cache; a request reads the longest prefix of its prompt
    that is byte for byte an earlier request's, once the prompt is at least 1024 tokens long,
    and the cached figure grows in increments of 128 tokens (1024, 1152, 1280 …); nothing is
    charged for writing. The prompt is read as the tools, then the instructions, then each input
    item, each as the compact JSON the client sent (its key order kept, so a reordered key breaks
    the prefix there, as it changes the provider's tokens). Tokens: ⌈UTF-8 bytes ÷ 4⌉ (a
    deterministic stand-in for the provider's tokenizer); the bytes read count whole tokens only.
    Not modelled: the cache's lifetime (5 to 10 minutes idle) and per-model caches."""

    MIN_TOKENS = 1024
    STEP = 128

    def __init__(self) -> None:
        # (key, chain digest of the first n units) → the latest prompt that began with them.
        self._prefixes: dict[tuple[str | None, bytes], bytes] = {}

    def observe(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(input tokens, cached tokens) of ``body``; remembers it for later requests."""
        key = body.get("prompt_cache_key")
        units = [_compact([body.get("tools"), body.get("instructions")])]
        units += [_compact(item) for item in body.get("input") or []]
        prompt = b"".join(units)
        chain = hashlib.sha256()
        starts: list[tuple[int, bytes]] = []  # (bytes before unit n + 1, digest through it)
        offset = 0
        for unit in units:
            chain.update(len(unit).to_bytes(8, "big") + unit)
            offset += len(unit)
            starts.append((offset, chain.digest()))
        shared = 0
        # The longest run of whole units an earlier request began with, then its bytes further.
        for end, digest in reversed(starts):
            earlier = self._prefixes.get((key, digest))
            if earlier is not None:
                shared = end + _common_prefix(prompt[end:], earlier[end:])
                break
        for _, digest in starts:
            self._prefixes[(key, digest)] = prompt
        total = max(1, -(-len(prompt) // 4))
        read = shared // 4
        cached = read - read % self.STEP if total >= self.MIN_TOKENS else 0
        return total, cached if cached >= self.MIN_TOKENS else 0


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share (a bisection of slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
