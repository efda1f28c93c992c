"""OpenAI Responses adapter (streaming), for models served by ``POST {base_url}/responses``.

Wire format (OpenAI API reference, "Create a model response", "Streaming events", and the
``openai`` SDK's event types, consulted 2026-12-05): ``Authorization: Bearer``; typed server-sent
events, each data object naming its ``type``: ``response.created`` / ``response.in_progress``,
``response.output_item.added`` and ``response.output_item.done`` (an output item whole: a
``message`` with ``output_text`` parts, a ``reasoning`` item with its ``summary`` and
``encrypted_content``, a ``function_call`` with ``call_id``, ``name``, ``arguments``),
``response.output_text.delta``, ``response.reasoning_summary_text.delta`` and
``response.reasoning_text.delta``, ``response.function_call_arguments.delta`` /
``.done``, then one terminal event carrying the whole response: ``response.completed``,
``response.incomplete`` (``incomplete_details.reason``: ``max_output_tokens`` or
``content_filter``) or ``response.failed`` (``response.error {code, message}``); a stream
may also end with an ``error`` event ``{code, message}``. The usage is the terminal response's:
``input_tokens`` (cached part included), ``input_tokens_details.cached_tokens`` (read from the
prompt cache) and ``.cache_write_tokens`` (written to it), ``output_tokens`` (reasoning
included), ``output_tokens_details.reasoning_tokens``. HTTP errors
are ``{"error": {"message", "type", "code"}}`` as for Chat Completions (an overflow is code
``context_length_exceeded``), so they are classified by the same rule. New event types may
appear: unknown ones are ignored. ``base_url`` includes the version, e.g.
``https://api.openai.com/v1``.

The terminal response's ``output`` is the answer; the items announced by
``response.output_item.done`` stand in when a server sends it empty. Reasoning items are kept
whole, as ``provider_opaque`` blocks of driver ``openai_responses`` (kind ``reasoning``), and
sent back verbatim on the next call (``app.providers.encoding.openai_responses``); their summary
text is the message's thinking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import ProviderOpaqueBlock, ToolCallBlock
from app.providers._errors import ErrorBody, parse_error_body
from app.providers._streaming import (
    Assembler,
    StreamState,
    protocol_error,
)
from app.providers.base import FinishReason, ModelResponse, ProviderError, Usage
from app.providers.encoding import RESPONSES_DRIVER
from app.providers.encoding.wire import openai_responses_body
from app.providers.openai_chat import OpenAIStreamingClient, classify_error
from app.providers.sse import ServerSentEvent

__all__ = ["OpenAIResponsesClient", "answer_events"]

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


class OpenAIResponsesClient(OpenAIStreamingClient):
    """``ModelClient`` for ``kind = openai_responses``."""

    def body(self, request: Mapping[str, Any], caching: CachePlan | None = None) -> bytes:
        return openai_responses_body(
            request,
            model=self._config.model_name,
            stream=True,
            caching=caching,
            reasoning=self._config.reasoning,
        )

    def _url(self) -> str:
        return self._config.base_url.rstrip("/") + "/responses"

    def _assembler(self, state: StreamState) -> Assembler:
        return _ResponsesAssembler(state)

    def _answer_events(self, answer: Any) -> list[ServerSentEvent]:
        return answer_events(answer)


def answer_events(answer: Any) -> list[ServerSentEvent]:
    """A complete ``response`` object as the events that would have streamed it: each output
    item added, its text, reasoning summary or arguments as one delta, done; then the terminal
    event of its ``status`` with the response. An ``{"error": ...}`` object is an error event."""
    if not isinstance(answer, dict):
        raise protocol_error("the JSON answer is not an object")
    if answer.get("object") != "response" and isinstance(answer.get("error"), dict):
        return [_event({"type": "error", **answer["error"]})]
    output = answer.get("output")
    if answer.get("object") != "response" or not isinstance(output, list):
        raise protocol_error("the JSON answer is not a response (it has no output list)")
    events: list[ServerSentEvent] = []
    for index, item in enumerate(output):
        events.append(_event({"type": "response.output_item.added", "output_index": index}))
        for kind, delta in _item_deltas(item):
            events.append(_event({"type": kind, "output_index": index, "delta": delta}))
        events.append(
            _event({"type": "response.output_item.done", "output_index": index, "item": item})
        )
    terminal = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }.get(str(answer.get("status")), "response.completed")
    events.append(_event({"type": terminal, "response": answer}))
    return events


def _event(payload: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(payload["type"], json.dumps(payload))


def _item_deltas(item: Any) -> list[tuple[str, str]]:
    """What a stream of ``item`` would have sent as deltas (the live view of a JSON answer)."""
    if not isinstance(item, dict):
        return []
    kind = item.get("type")
    if kind == "message":
        return [("response.output_text.delta", text) for text in _texts(item)]
    if kind == "reasoning":
        return [("response.reasoning_summary_text.delta", text) for text in _summary(item)]
    if kind == "function_call" and isinstance(item.get("arguments"), str):
        return [("response.function_call_arguments.delta", item["arguments"])]
    return []


def _texts(item: dict[str, Any]) -> list[str]:
    """The answer text of a ``message`` output item (a refusal is what the model said)."""
    out: list[str] = []
    for part in item.get("content") or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
    return out


def _summary(item: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for part in item.get("summary") or []
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]


class _ResponsesAssembler:
    def __init__(self, state: StreamState) -> None:
        self._state = state
        self._done: dict[int, dict[str, Any]] = {}  # output_index → the item, whole
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._terminal: str | None = None
        self._response: dict[str, Any] = {}

    def _protocol(self, what: str) -> ProviderError:
        return protocol_error(f"malformed responses stream: {what}", self._state)

    async def feed(self, event: ServerSentEvent) -> bool:
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            raise self._protocol(f"the data of a {event.event} event is not JSON") from None
        if not isinstance(payload, dict):
            raise self._protocol("an event is not a JSON object")
        kind = payload.get("type", event.event)
        if kind == "error":
            raise classify_error(None, _error_of(payload), semantic=self._state.semantic)
        if kind == "response.output_text.delta":
            await self._delta(payload, self._text, self._state.text)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            await self._delta(payload, self._reasoning, self._state.reasoning)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        ):
            self._state.tool_call_output()
        elif kind == "response.output_item.done":
            index, item = payload.get("output_index"), payload.get("item")
            if not isinstance(index, int) or not isinstance(item, dict):
                raise self._protocol("response.output_item.done without output_index or item")
            self._done[index] = item
            if item.get("type") == "function_call":
                self._state.tool_call_output()
        elif kind in _TERMINAL:
            response = payload.get("response")
            if not isinstance(response, dict):
                raise self._protocol(f"{kind} without a response object")
            self._terminal, self._response = kind, response
            return True
        # created, in_progress, content parts, added items and future types: nothing to keep.
        return False

    async def _delta(self, payload: dict[str, Any], into: list[str], emit: Any) -> None:
        delta = payload.get("delta")
        if isinstance(delta, str) and delta:
            into.append(delta)
            await emit(delta)

    def finish(self) -> ModelResponse:
        if self._terminal is None:
            raise self._protocol("the stream ended without response.completed")
        response = self._response
        if self._terminal == "response.failed":
            raise classify_error(None, _error_of(response), semantic=self._state.semantic)
        output = response.get("output")
        items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
        if not items:
            items = [self._done[i] for i in sorted(self._done)]
        texts = [t for i in items if i.get("type") == "message" for t in _texts(i)]
        summaries = [t for i in items if i.get("type") == "reasoning" for t in _summary(i)]
        tool_calls = [
            _tool_call(i, n) for n, i in enumerate(items) if i.get("type") == "function_call"
        ]
        if self._terminal == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            finish: FinishReason = _INCOMPLETE.get(str(reason), "other")
            raw = f"incomplete:{reason}"
        else:
            finish = "tool_calls" if tool_calls else "stop"
            raw = "completed"
        return ModelResponse(
            # The items are the answer; what streamed stands in only when they carry no text.
            text="".join(texts) or "".join(self._text),
            thinking="".join(summaries) or "".join(self._reasoning),
            provider_opaque=[_reasoning_block(i) for i in items if i.get("type") == "reasoning"],
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=_usage(response.get("usage")),
            raw_finish_reason=raw,
        )


def _tool_call(item: dict[str, Any], index: int) -> ToolCallBlock:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(name, str) or not name:
        raise protocol_error(f"malformed responses stream: function call {index} has no name")
    arguments = item.get("arguments")
    return {
        "type": "tool_call",
        # A compatible server that omits the call id still needs pairable results.
        "id": call_id if isinstance(call_id, str) and call_id else f"call_{index}",
        "name": name,
        # A call without arguments is the empty object.
        "input": arguments if isinstance(arguments, str) and arguments else "{}",
    }


def _reasoning_block(item: dict[str, Any]) -> ProviderOpaqueBlock:
    """The reasoning item exactly as received: it goes back verbatim on the next call."""
    return {
        "type": "provider_opaque",
        "driver": RESPONSES_DRIVER,
        "kind": "reasoning",
        "payload": item,
    }


def _error_of(payload: dict[str, Any]) -> ErrorBody:
    """The error of an ``error`` event (its own fields) or of a failed response (``error``)."""
    error = payload.get("error")
    return parse_error_body(error if isinstance(error, dict) else payload)


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    given = usage.get("input_tokens_details")
    made = usage.get("output_tokens_details")
    return Usage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cached_tokens=_int(given.get("cached_tokens")) if isinstance(given, dict) else None,
        reasoning_tokens=_int(made.get("reasoning_tokens")) if isinstance(made, dict) else None,
        cache_creation_tokens=(
            _int(given.get("cache_write_tokens")) if isinstance(given, dict) else None
        ),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
