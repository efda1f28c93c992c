"""OpenAI Chat Completions adapter (streaming), also for OpenAI-compatible servers.

Wire format (OpenAI API reference, "Create chat completion" and "The chat completion chunk
object", consulted 2026-11-30): ``POST {base_url}/chat/completions`` with ``Authorization: Bearer``;
``data: {chunk}`` events whose ``choices[0].delta`` carries ``content`` and ``tool_calls[i]``
fragments keyed by ``index`` (``id`` and ``function.name`` in the first fragment, ``arguments``
split anywhere, even mid-string), ``choices[0].finish_reason`` on the last choice chunk, a final
chunk with empty ``choices`` and ``usage`` (``stream_options.include_usage``), then
``data: [DONE]``. Errors: ``{"error": {"message", "type", "code"}}``; an overflow has code
``context_length_exceeded``. ``base_url`` includes the version, e.g. ``https://api.openai.com/v1``.
Reasoning deltas (``delta.reasoning_content`` / ``delta.reasoning``) are an extension of
compatible servers (DeepSeek, vLLM, OpenRouter); OpenAI itself sends none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import ToolCallBlock
from app.providers._errors import ErrorBody, parse_error_body, retry_after_seconds
from app.providers._streaming import (
    Assembler,
    StreamingClient,
    StreamState,
    protocol_error,
)
from app.providers.base import FinishReason, ModelResponse, ProviderError, Usage
from app.providers.encoding.wire import openai_chat_body
from app.providers.sse import ServerSentEvent

__all__ = ["OpenAIChatClient", "OpenAIStreamingClient"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


class OpenAIStreamingClient(StreamingClient):
    """What OpenAI's two protocols share: a Bearer key, an SSE answer, the error object."""

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def _http_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        return classify_error(
            status, parse_error_body(body), retry_after=retry_after_seconds(headers)
        )


class OpenAIChatClient(OpenAIStreamingClient):
    """``ModelClient`` for ``kind = openai_chat``."""

    def body(self, request: Mapping[str, Any], caching: CachePlan | None = None) -> bytes:
        return openai_chat_body(
            request, model=self._config.model_name, stream=True, caching=caching
        )

    def _url(self) -> str:
        return self._config.base_url.rstrip("/") + "/chat/completions"

    def _assembler(self, state: StreamState) -> Assembler:
        return _ChatAssembler(state)

    def _answer_events(self, answer: Any) -> list[ServerSentEvent]:
        return answer_events(answer)


def answer_events(answer: Any) -> list[ServerSentEvent]:
    """A complete ``chat.completion`` as the chunks that would have streamed it: one chunk with
    each choice's whole message as its delta (tool calls numbered as in a stream) and the
    usage, then ``[DONE]``. An ``{"error": ...}`` object is its error chunk."""
    if not isinstance(answer, dict):
        raise protocol_error("the JSON answer is not an object")
    if answer.get("error"):
        return [ServerSentEvent(data=json.dumps(answer))]
    choices = answer.get("choices")
    if not isinstance(choices, list):
        raise protocol_error("the JSON answer is not a chat completion (it has no choices)")
    deltas: list[dict[str, Any]] = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise protocol_error("a choice of the JSON answer has no message")
        delta: dict[str, Any] = {}
        content = message.get("content")
        if isinstance(content, list):  # content parts, as some compatible servers send
            content = "".join(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        if isinstance(content, str):
            delta["content"] = content
        for key in ("reasoning_content", "reasoning"):
            if isinstance(message.get(key), str):
                delta[key] = message[key]
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": index} if isinstance(call, dict) else call
                for index, call in enumerate(calls)
            ]
        deltas.append(
            {
                "index": choice.get("index", 0),
                "delta": delta,
                "finish_reason": choice.get("finish_reason"),
            }
        )
    chunk: dict[str, Any] = {"choices": deltas}
    if "usage" in answer:
        chunk["usage"] = answer["usage"]
    return [ServerSentEvent(data=json.dumps(chunk)), ServerSentEvent(data="[DONE]")]


def classify_error(
    status: int | None,
    error: ErrorBody,
    *,
    retry_after: float | None = None,
    semantic: bool = False,
) -> ProviderError:
    """One OpenAI error (an HTTP response, or an ``error`` chunk mid-stream when ``status`` is
    None) as a ``ProviderError``; decided by status, ``type`` and ``code`` only."""
    where = f"HTTP {status}" if status is not None else "in the stream"
    marks = {error.type, error.code}
    if "context_length_exceeded" in marks or status == 413:
        return ProviderError.of(
            "context_overflow",
            f"the model's context window cannot hold this request ({where}{error.quoted()})",
            semantic_output_received=semantic,
            status=status,
        )
    if status in (401, 403) or "invalid_api_key" in marks:
        # The provider's message may quote part of the key: it is not repeated.
        return ProviderError.of(
            "auth",
            f"the provider refused the API key ({where}); check the key in the configured "
            "environment variable",
            semantic_output_received=semantic,
            status=status,
        )
    if status == 429 or marks & {"rate_limit_exceeded", "insufficient_quota"}:
        # An exhausted quota does not recover by waiting: not retried.
        quota = "insufficient_quota" in marks
        return ProviderError.of(
            "rate_limited",
            f"the provider is rate limiting this key ({where}{error.quoted()})",
            semantic_output_received=semantic,
            retryable=not quota,
            retry_after=retry_after,
            status=status,
        )
    if status is None or status in (408, 409) or status >= 500:
        return ProviderError.of(
            "server_error",
            f"the provider failed ({where}{error.quoted()}); retry later",
            semantic_output_received=semantic,
            retryable=True,
            retry_after=retry_after,
            status=status,
        )
    return ProviderError.of(
        "bad_request",
        f"the provider refused the request ({where}{error.quoted()}); check the model name "
        "and provider settings",
        semantic_output_received=semantic,
        status=status,
    )


@dataclass(slots=True)
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ChatAssembler:
    def __init__(self, state: StreamState) -> None:
        self._state = state
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _ToolCallParts] = {}
        self._finish: str | None = None
        self._usage = Usage()

    def _protocol(self, what: str) -> ProviderError:
        return protocol_error(f"malformed chat completion stream: {what}", self._state)

    async def feed(self, event: ServerSentEvent) -> bool:
        if event.data.strip() == "[DONE]":
            return True
        try:
            chunk = json.loads(event.data)
        except (ValueError, RecursionError):
            raise self._protocol("an event is not JSON") from None
        if not isinstance(chunk, dict):
            raise self._protocol("an event is not a JSON object")
        if chunk.get("error"):
            raise classify_error(None, parse_error_body(chunk), semantic=self._state.semantic)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self._protocol("choices is not a list")
        for choice in choices:
            # One completion is requested (n = 1); other indices would be a server bug.
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                await self._choice(choice)
        return False

    async def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise self._protocol("delta is not an object")
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            await self._state.text(content)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            await self._state.reasoning(reasoning)
        for fragment in delta.get("tool_calls") or []:
            self._tool_call_fragment(fragment)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._finish = finish

    def _tool_call_fragment(self, fragment: Any) -> None:
        if not isinstance(fragment, dict) or not isinstance(fragment.get("index"), int):
            raise self._protocol("a tool call delta has no integer index")
        parts = self._calls.setdefault(fragment["index"], _ToolCallParts())
        if isinstance(fragment.get("id"), str) and fragment["id"]:
            parts.id = fragment["id"]
        function = fragment.get("function") or {}
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name and not parts.name:
            parts.name = name
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            parts.arguments.append(arguments)
        self._state.tool_call_output()

    def finish(self) -> ModelResponse:
        if self._finish is None:
            raise self._protocol("the stream ended without a finish_reason")
        tool_calls: list[ToolCallBlock] = []
        for index in sorted(self._calls):
            parts = self._calls[index]
            if not parts.name:
                raise self._protocol(f"tool call {index} has no function name")
            tool_calls.append(
                {
                    "type": "tool_call",
                    # Some compatible servers omit ids; a stable stand-in keeps results pairable.
                    "id": parts.id or f"call_{index}",
                    "name": parts.name,
                    # A call without arguments may stream none: that is the empty object.
                    "input": "".join(parts.arguments) or "{}",
                }
            )
        return ModelResponse(
            text="".join(self._text),
            thinking="".join(self._reasoning),
            tool_calls=tool_calls,
            finish_reason=_FINISH.get(self._finish, "other"),
            usage=self._usage,
            raw_finish_reason=self._finish,
        )


def _usage(usage: dict[str, Any]) -> Usage:
    prompt = usage.get("prompt_tokens_details")
    completion = usage.get("completion_tokens_details")
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(prompt.get("cached_tokens")) if isinstance(prompt, dict) else None,
        reasoning_tokens=(
            _int(completion.get("reasoning_tokens")) if isinstance(completion, dict) else None
        ),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
