"""OpenAI Chat Completions (``POST /v1/compat/openai/chat/completions``): the request read into
a ``ProxyRequest``, the answer written back as ``chat.completion`` or its chunk stream.

Read: system and developer messages (joined in order, a blank line between them) are the system
prompt; user content is a string or parts (``text``, ``image_url``); assistant messages keep
their text and ``tool_calls``; a ``tool`` message is the result of the call it names (the name is
the call's). ``tools`` are function definitions. ``max_completion_tokens`` (or the older
``max_tokens``) caps the answer. Every other field is kept in ``params``; its sampling fields
(``temperature``, ``stop``, ``tool_choice`` ...) are checked into ``sampling`` (spec §21.3).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from app.api.compat._decoded import Decoded, DecodedPrefixes
from app.api.compat._sampling import read as read_sampling
from app.core.content import Block, ToolCallBlock, ToolResultBlock
from app.core.errors import InvalidInput
from app.core.pipeline.prepared_call import ToolDefinition
from app.providers.base import ModelResponse
from app.services.proxy.contract import (
    AnswerEvent,
    CompatProtocol,
    Completed,
    ProxyMessage,
    ProxyRequest,
    TextDelta,
)

__all__ = ["CODEC", "OpenAIChatCodec"]

_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "other": "stop",
}
_KNOWN = {
    "model",
    "messages",
    "tools",
    "stream",
    "max_tokens",
    "max_completion_tokens",
}


# The refusal codes the other codecs use (``app.api.compat._shared``), by the field refused.
_CODES = (
    ("model", "invalid_model"),
    ("messages", "invalid_messages"),
    ("tools", "invalid_tools"),
    ("max_completion_tokens", "invalid_max_tokens"),
)


def _refused(field: str, what: str) -> InvalidInput:
    code = next(c for prefix, c in _CODES if field.startswith(prefix))
    return InvalidInput(code, f"{field} {what}", field=field)


def _text_of(content: Any, field: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _refused(f"{field}[{i}]", "must be a text part here")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    if content is None:
        return ""
    raise _refused(field, "must be a string or a list of parts")


def _user_blocks(content: Any, field: str) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _refused(field, "must be a string or a list of parts")
    blocks: list[Block] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url")
            if not isinstance(url, str) or not url:
                raise _refused(f"{field}[{i}].image_url.url", "must be a URL")
            blocks.append({"type": "data", "source": _image_source(url), "name": None})
        else:
            raise _refused(f"{field}[{i}].type", "must be text or image_url")
    return blocks


def _image_source(url: str) -> Any:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"source_type": "base64", "data": data, "media_type": head or None}
    return {"source_type": "url", "url": url}


class OpenAIChatCodec:
    protocol: CompatProtocol = "openai_chat"

    def __init__(self) -> None:
        # Each conversation's last request, decoded: the next decodes only what it adds.
        self._decoded = DecodedPrefixes()

    def decode(self, body: Mapping[str, Any]) -> ProxyRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _refused("model", "must name a registered model id")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise _refused("messages", "must be a non-empty list")
        # A conversation is told apart by its model and first message (the system prompt,
        # usually); another one under the same key only costs a comparison that fails early.
        first = raw[0].get("content") if isinstance(raw[0], dict) else None
        key = (model, first if isinstance(first, str) else None)
        earlier = self._decoded.extended(key, raw)
        system: list[str] = []
        messages: list[ProxyMessage] = []
        names: dict[str, str] = {}
        start = 0
        if earlier is not None:
            system, messages = list(earlier.system), list(earlier.messages)
            names, start = dict(earlier.names), len(earlier.raw)
        for i in range(start, len(raw)):
            m = raw[i]
            field = f"messages[{i}]"
            if not isinstance(m, dict):
                raise _refused(field, "must be an object")
            role = m.get("role")
            if role in ("system", "developer"):
                system.append(_text_of(m.get("content"), f"{field}.content"))
            elif role == "user":
                messages.append(ProxyMessage("user", _user_blocks(m.get("content"), field)))
            elif role == "assistant":
                messages.append(ProxyMessage("assistant", self._assistant(m, field, names)))
            elif role == "tool":
                call_id = m.get("tool_call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise _refused(f"{field}.tool_call_id", "must name the call it answers")
                result: ToolResultBlock = {
                    "type": "tool_result",
                    "id": call_id,
                    "name": names.get(call_id, ""),
                    "output": [
                        {"type": "text", "text": _text_of(m.get("content"), f"{field}.content")}
                    ],
                    "state": "success",
                }
                messages.append(ProxyMessage("tool", [result]))
            else:
                raise _refused(
                    f"{field}.role", "must be system, developer, user, assistant or tool"
                )
        if not messages:
            raise _refused("messages", "must hold a user message, not only system messages")
        self._decoded.keep(key, Decoded(list(raw), list(messages), names, tuple(system)))
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise _refused("max_completion_tokens", "must be a whole number, 1 or more")
        params = {k: v for k, v in body.items() if k not in _KNOWN}
        return ProxyRequest(
            protocol=self.protocol,
            model=model,
            system="\n\n".join(system) if system else None,
            messages=messages,
            tools=self._tools(body.get("tools")),
            stream=bool(body.get("stream")),
            max_output_tokens=limit,
            params=params,
            sampling=read_sampling(params, self.protocol),
        )

    def _assistant(self, m: dict[str, Any], field: str, names: dict[str, str]) -> list[Block]:
        blocks: list[Block] = []
        text = _text_of(m.get("content"), f"{field}.content")
        if text:
            blocks.append({"type": "text", "text": text})
        for j, call in enumerate(m.get("tool_calls") or []):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                raise _refused(f"{field}.tool_calls[{j}]", "must have an id and a function")
            arguments = function.get("arguments")
            block: ToolCallBlock = {
                "type": "tool_call",
                "id": call["id"],
                "name": str(function.get("name", "")),
                "input": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
            names[call["id"]] = block["name"]
            blocks.append(block)
        return blocks

    def _tools(self, raw: Any) -> list[ToolDefinition]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise _refused("tools", "must be a list")
        tools: list[ToolDefinition] = []
        for i, tool in enumerate(raw):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not function.get("name"):
                raise _refused(f"tools[{i}]", "must be a function tool with a name")
            tools.append(
                {
                    "name": str(function["name"]),
                    "description": str(function.get("description") or ""),
                    "input_schema": function.get("parameters")
                    or {"type": "object", "properties": {}},
                }
            )
        return tools

    # -- answers ---------------------------------------------------------------------------

    def render(self, response: ModelResponse, *, model: str, response_id: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
        if response.tool_calls:
            message["tool_calls"] = [_call(c) for c in response.tool_calls]
        return {
            "id": response_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _FINISH[response.finish_reason],
                    "logprobs": None,
                }
            ],
            "usage": _usage(response),
        }

    def render_stream(
        self, events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
    ) -> AsyncIterator[bytes]:
        return self.render_stream_with(events, model=model, response_id=response_id)

    def includes_usage(self, request: ProxyRequest) -> bool:
        """Whether the stream ends with a usage chunk (``stream_options.include_usage``)."""
        options = request.params.get("stream_options")
        return isinstance(options, dict) and options.get("include_usage") is True

    async def render_stream_with(
        self,
        events: AsyncIterator[AnswerEvent],
        *,
        model: str,
        response_id: str,
        include_usage: bool = False,
    ) -> AsyncIterator[bytes]:
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body = {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return _sse(body)

        yield chunk({"role": "assistant", "content": ""})
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    yield chunk({"content": event.text})
                elif isinstance(event, Completed):
                    response = event.response
                    for index, call in enumerate(response.tool_calls):
                        yield chunk({"tool_calls": [{"index": index, **_call(call)}]})
                    yield chunk({}, _FINISH[response.finish_reason])
                    if include_usage:
                        yield _sse(
                            {
                                "id": response_id,
                                "object": "chat.completion.chunk",
                                "created": created,
                                "model": model,
                                "choices": [],
                                "usage": _usage(response),
                            }
                        )
        except Exception as exc:  # the stream's error event, as OpenAI sends one mid-stream
            code = getattr(exc, "code", "server_error")
            detail = getattr(exc, "detail", "the model call failed")
            yield _sse(self.render_error(502, str(code), str(detail)))
        yield b"data: [DONE]\n\n"

    def render_error(self, status: int, code: str, message: str) -> dict[str, Any]:
        kinds = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "invalid_request_error",
            409: "invalid_request_error",
            413: "invalid_request_error",
            422: "invalid_request_error",
            429: "rate_limit_error",
        }
        kind = kinds.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _call(call: ToolCallBlock) -> dict[str, Any]:
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": call["input"]},
    }


def _usage(response: ModelResponse) -> dict[str, Any]:
    usage = response.usage
    prompt = usage.input_tokens or 0
    completion = usage.output_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
    }


def _sse(body: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


CODEC = OpenAIChatCodec()
