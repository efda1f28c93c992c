"""The answer side of the OpenAI Responses codec: the ``response`` object, its server-sent events
and the error object (``app.api.compat.openai_responses`` reads the request).

Output items come in the order the Responses encoding sends an assistant message back
(``app.providers.encoding.openai_responses``): reasoning items (the ``provider_opaque`` items of
driver ``openai_responses``, verbatim), one ``message`` with the text as ``output_text``, one
``function_call`` per tool call with its arguments verbatim; so the items the SDK sends back on the
next call read as the very message the service stored. Thinking that came without a reasoning
item (another provider's) is not shown: a made-up reasoning item would be sent back, and a
provider refuses reasoning items it did not make.

Streaming follows the documented event sequence, each event with its ``sequence_number``:
``response.created``, ``response.in_progress``, the message's ``output_item.added`` and
``content_part.added`` at the first text delta, ``output_text.delta``\\ s, then, with the
completed answer, the ``.done`` events, the reasoning items and function calls
(``function_call_arguments.delta`` / ``.done``), and ``response.completed`` (or
``response.incomplete`` when the answer was cut at its token limit). The streamed text comes
before the reasoning items are known, so its ``output_index`` is 0 even when the final
``output`` lists reasoning first: the SDK matches items by id. A failure mid-answer is an
``error`` event, then ``response.failed``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from app.api.compat._shared import failure, sse
from app.providers.base import ModelResponse, Usage
from app.providers.encoding.openai_responses import RESPONSES_DRIVER
from app.services.proxy.contract import AnswerEvent, Completed, TextDelta

__all__ = ["error_body", "output_items", "response_body", "response_events", "usage"]

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def response_body(
    response: ModelResponse | None,
    *,
    model: str,
    response_id: str,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``response`` object: of ``response`` when given, in progress (``None``), or failed
    (``error``)."""
    status = "in_progress"
    incomplete = None
    output: list[dict[str, Any]] = []
    figures = None
    if error is not None:
        status = "failed"
    elif response is not None:
        reason = _INCOMPLETE.get(response.finish_reason)
        status = "incomplete" if reason and not response.tool_calls else "completed"
        incomplete = {"reason": reason} if status == "incomplete" else None
        output = output_items(response, response_id)
        figures = usage(response.usage)
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": figures,
        "metadata": {},
    }


def output_items(response: ModelResponse, response_id: str) -> list[dict[str, Any]]:
    items = _reasoning(response)
    if response.text:
        items.append(_message(response_id, response.text, "completed"))
    items.extend(_call(response_id, n, call) for n, call in enumerate(response.tool_calls))
    return items


def usage(figures: Usage) -> dict[str, Any]:
    """The usage object; ``input_tokens`` holds the cached part, as ours does."""
    prompt, output = figures.input_tokens or 0, figures.output_tokens or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": figures.cached_tokens or 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": figures.reasoning_tokens or 0},
        "total_tokens": prompt + output,
    }


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """OpenAI's error object (the ``openai`` SDK reads ``error.message`` and keeps the body);
    the type by status, as the API's families go."""
    kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _suffix(response_id: str) -> str:
    return response_id.removeprefix("resp_")


def _reasoning(response: ModelResponse) -> list[dict[str, Any]]:
    return [
        dict(block["payload"])
        for block in response.provider_opaque
        if block["driver"] == RESPONSES_DRIVER
        and block["kind"] == "reasoning"
        and isinstance(block["payload"], dict)
    ]


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message(response_id: str, text: str | None, status: str) -> dict[str, Any]:
    return {
        "id": f"msg_{_suffix(response_id)}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [] if text is None else [_text_part(text)],
    }


def _call(response_id: str, number: int, call: Any) -> dict[str, Any]:
    return {
        "id": f"fc_{_suffix(response_id)}_{number}",
        "type": "function_call",
        "status": "completed",
        "call_id": call["id"],
        "name": call["name"],
        # Verbatim, as the encoding sends it back; only an empty one is not JSON.
        "arguments": call["input"] or "{}",
    }


async def response_events(
    events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
) -> AsyncIterator[bytes]:
    stream = _EventStream(model, response_id)
    started = response_body(None, model=model, response_id=response_id)
    yield stream.event("response.created", response=started)
    yield stream.event("response.in_progress", response=started)
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                for chunk in stream.text(event.text):
                    yield chunk
            elif isinstance(event, Completed):
                for chunk in stream.finish(event.response):
                    yield chunk
                return
            # Reasoning deltas are not shown (see the module docstring).
        raise RuntimeError("the answer's events ended before it completed")
    except Exception as exc:  # every failure becomes the protocol's error events
        status, code, message = failure(exc)
        del status  # the HTTP status went out with the first event; the code tells what failed
        yield stream.event("error", code=code, message=message, param=None)
        failed = response_body(
            None, model=model, response_id=response_id, error={"code": code, "message": message}
        )
        yield stream.event("response.failed", response=failed)


class _EventStream:
    """Numbers the events and tracks the output items already announced."""

    def __init__(self, model: str, response_id: str) -> None:
        self._model = model
        self._id = response_id
        self._sequence = 0
        self._items = 0
        self._message_index: int | None = None
        self._text: list[str] = []

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return sse(kind, payload)

    def _added(self, item: dict[str, Any]) -> tuple[int, bytes]:
        index = self._items
        self._items += 1
        return index, self.event("response.output_item.added", output_index=index, item=item)

    def text(self, delta: str) -> list[bytes]:
        out: list[bytes] = []
        message = _message(self._id, None, "in_progress")
        if self._message_index is None:
            self._message_index, chunk = self._added(message)
            out.append(chunk)
            out.append(self._part("response.content_part.added", _text_part("")))
        self._text.append(delta)
        out.append(
            self.event(
                "response.output_text.delta",
                item_id=message["id"],
                output_index=self._message_index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return out

    def _part(self, kind: str, part: dict[str, Any]) -> bytes:
        return self.event(
            kind,
            item_id=f"msg_{_suffix(self._id)}",
            output_index=self._message_index,
            content_index=0,
            part=part,
        )

    def finish(self, response: ModelResponse) -> list[bytes]:
        out: list[bytes] = []
        if self._message_index is None and response.text:
            out.extend(self.text(response.text))  # text that came whole: announced now
        if self._message_index is not None:
            out.extend(self._close_message())
        for item in output_items(response, self._id):
            if item["type"] == "message":
                continue  # closed above
            if item["type"] == "function_call":
                out.extend(self._function_call(item))
            else:
                index, chunk = self._added(item)
                out.extend([chunk, self._done(index, item)])
        body = response_body(response, model=self._model, response_id=self._id)
        kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        out.append(self.event(kind, response=body))
        return out

    def _close_message(self) -> list[bytes]:
        text = "".join(self._text)
        message = _message(self._id, text, "completed")
        return [
            self.event(
                "response.output_text.done",
                item_id=message["id"],
                output_index=self._message_index,
                content_index=0,
                text=text,
                logprobs=[],
            ),
            self._part("response.content_part.done", _text_part(text)),
            self._done(self._message_index or 0, message),
        ]

    def _done(self, index: int, item: dict[str, Any]) -> bytes:
        return self.event("response.output_item.done", output_index=index, item=item)

    def _function_call(self, item: dict[str, Any]) -> list[bytes]:
        index, added = self._added({**item, "status": "in_progress", "arguments": ""})
        fields = {"item_id": item["id"], "output_index": index}
        return [
            added,
            self.event("response.function_call_arguments.delta", delta=item["arguments"], **fields),
            self.event(
                "response.function_call_arguments.done",
                name=item["name"],
                arguments=item["arguments"],
                **fields,
            ),
            self._done(index, item),
        ]
