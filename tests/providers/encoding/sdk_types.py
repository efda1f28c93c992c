"""Bodies checked against the official SDKs' request types (``anthropic``, ``openai``: Chat
Completions and Responses).

The SDKs describe a request body as ``TypedDict``s; pydantic validates a body against them and
drops every key the types do not know, so a body that comes back changed holds a field (or a
field in a place, such as ``cache_control`` on a thinking block) the provider does not define.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from anthropic.types import message_create_params as anthropic_params
from openai.types.chat import completion_create_params as openai_params
from openai.types.responses import response_create_params as responses_params
from pydantic import TypeAdapter

__all__ = ["assert_anthropic_body", "assert_openai_body", "assert_responses_body"]


def _plain(value: Any) -> Any:
    """The validated value as plain data (the SDKs' ``Iterable`` fields validate lazily)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Iterable):
        return [_plain(item) for item in value]
    return value


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _check(kind: Any, body: Mapping[str, Any]) -> None:
    validated = _plain(_adapter(kind).validate_python(body))
    assert validated == body, "the body holds fields the SDK's request type does not define"


def assert_anthropic_body(body: Mapping[str, Any]) -> None:
    """``body`` is a valid ``POST /v1/messages`` body by the Anthropic SDK's types."""
    streaming = body.get("stream") is True
    _check(
        anthropic_params.MessageCreateParamsStreaming
        if streaming
        else anthropic_params.MessageCreateParamsNonStreaming,
        body,
    )


def assert_openai_body(body: Mapping[str, Any]) -> None:
    """``body`` is a valid Chat Completions body by the OpenAI SDK's types."""
    streaming = body.get("stream") is True
    _check(
        openai_params.CompletionCreateParamsStreaming
        if streaming
        else openai_params.CompletionCreateParamsNonStreaming,
        body,
    )


def assert_responses_body(body: Mapping[str, Any]) -> None:
    """``body`` is a valid ``POST /v1/responses`` body by the OpenAI SDK's types."""
    streaming = body.get("stream") is True
    _check(
        responses_params.ResponseCreateParamsStreaming
        if streaming
        else responses_params.ResponseCreateParamsNonStreaming,
        body,
    )
