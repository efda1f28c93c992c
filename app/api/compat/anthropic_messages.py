"""The Anthropic Messages codec of the drop-in endpoint ``POST /v1/compat/anthropic/v1/messages``.

The request is what ``anthropic.Anthropic().messages.create`` sends (Anthropic API reference
"Messages", "Streaming messages", "Tool use", "Extended thinking", "Errors"): ``system`` a string
or text blocks; ``messages`` of ``user`` turns (``text``, ``image``, ``document``,
``tool_result {tool_use_id, content, is_error}``) and ``assistant`` turns (``text``,
``thinking {thinking, signature}``, ``redacted_thinking {data}``, ``tool_use {id, name,
input}``); ``tools`` of ``{name, description, input_schema}``; ``max_tokens``; ``stream``. Every
other field (``temperature``, ``tool_choice``, ``thinking``, ``metadata`` ...) goes verbatim into
``params``, its sampling fields checked into ``sampling`` too (spec §21.3). ``cache_control``
markers are dropped: the service places its own (spec §19.2).

Each turn is read into the content model the way the Anthropic adapter builds it from an answer
(``app.providers.anthropic_messages``), so an answer rendered here and sent back by the SDK on
the next call reads as the very message the service stored: an assistant turn is a
``ModelResponse``'s content (thinking, text, signed thinking kept as ``provider_opaque``
through ``opaque_thinking``, tool calls); each ``tool_result`` is its own tool message, in turn
order, and the turn's other blocks a user message. Server tools (web search, code execution ...)
and their blocks have no place in the content model: refused with ``unsupported_tool`` /
``unsupported_block``, naming where.

The answer is the inverse of the encoding (``app.providers.encoding.anthropic_messages``): its
assistant blocks (signed thinking first, text, ``tool_use`` with ``input`` an object), plus a
``thinking`` block with an empty signature for thinking that came without one (another
provider's reasoning), so the SDK shows it and sends it back unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from app.api.compat._anthropic_answer import error_body, message_body, message_events
from app.api.compat._decoded import Decoded, DecodedPrefixes
from app.api.compat._sampling import read as read_sampling
from app.api.compat._shared import (
    optional_bool,
    positive_int,
    required_string,
    tool_definition,
    tool_state,
)
from app.core.content import Block, DataBlock, OutputBlock, ToolCallBlock, compact_json
from app.core.errors import InvalidInput
from app.core.pipeline.prepared_call import ToolDefinition
from app.providers.base import ModelResponse
from app.providers.encoding._common import PDF_MEDIA_TYPE
from app.providers.encoding.anthropic_messages import opaque_thinking
from app.services.proxy.contract import AnswerEvent, ProxyMessage, ProxyRequest

__all__ = ["CODEC", "REFUSALS", "AnthropicMessagesCodec"]

# The codes ``decode`` refuses a request with: answered in the protocol's error shape, never
# as problem+json, so they are not in the API description (tests/test_openapi_codes.py).
REFUSALS: tuple[str, ...] = (
    "invalid_request",
    "invalid_model",
    "invalid_messages",
    "invalid_system",
    "invalid_tools",
    "invalid_max_tokens",
    "invalid_sampling",
    "unsupported_block",
    "unsupported_tool",
)
# The fields ``decode`` reads; every other one is a ``param``.
_CONSUMED = frozenset({"model", "system", "messages", "tools", "max_tokens", "stream"})


class AnthropicMessagesCodec:
    protocol: Literal["anthropic_messages"] = "anthropic_messages"

    def __init__(self) -> None:
        # Each conversation's last request, decoded: the next decodes only what it adds.
        self._decoded = DecodedPrefixes()

    def decode(self, body: Mapping[str, Any]) -> ProxyRequest:
        if not isinstance(body, Mapping):
            raise InvalidInput("invalid_request", "the body must be a JSON object")
        model = required_string(body, "model", code="invalid_model")
        system = _system(body.get("system"))
        params = {k: v for k, v in body.items() if k not in _CONSUMED}
        return ProxyRequest(
            protocol=self.protocol,
            model=model,
            system=system,
            messages=self._messages(body.get("messages"), model, system),
            tools=_tools(body.get("tools")),
            stream=optional_bool(body, "stream", code="invalid_request"),
            max_output_tokens=positive_int(body, "max_tokens", code="invalid_max_tokens"),
            params=params,
            sampling=read_sampling(params, self.protocol),
        )

    def render(self, response: ModelResponse, *, model: str, response_id: str) -> dict[str, Any]:
        return message_body(response, model=model, response_id=response_id)

    def render_stream(
        self, events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
    ) -> AsyncIterator[bytes]:
        return message_events(events, model=model, response_id=response_id)

    def render_error(self, status: int, code: str, message: str) -> dict[str, Any]:
        return error_body(status, code, message)

    def _messages(self, value: Any, model: str, system: str | None) -> list[ProxyMessage]:
        if not isinstance(value, list) or not value:
            raise InvalidInput("invalid_messages", "messages must be a non-empty list")
        # A conversation is told apart by its model, system prompt and first message; another
        # conversation under the same key only costs a comparison that fails early.
        first = value[0].get("content") if isinstance(value[0], dict) else None
        key = (model, system, first if isinstance(first, str) else None)
        decoded = _messages(value, self._decoded.extended(key, value))
        self._decoded.keep(key, decoded)
        return list(decoded.messages)  # the kept list stays the memo's own


CODEC = AnthropicMessagesCodec()

# -- the request -----------------------------------------------------------------------------


def _system(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if not isinstance(value, list):
        raise InvalidInput("invalid_system", "system must be a string or a list of text blocks")
    texts: list[str] = []
    for index, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidInput("invalid_system", f"system[{index}] is not a text block")
        if not isinstance(block.get("text"), str):
            raise InvalidInput("invalid_system", f"system[{index}].text must be a string")
        texts.append(block["text"])
    return "\n\n".join(texts) or None


def _tools(value: Any) -> list[ToolDefinition]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput("invalid_tools", "tools must be a list")
    out: list[ToolDefinition] = []
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise InvalidInput("invalid_tools", f"tool {index} is not an object")
        if tool.get("type") not in (None, "custom"):
            raise InvalidInput(
                "unsupported_tool",
                f"tool {index} is a {tool.get('type')!r:.60} server tool, which runs at the "
                "provider; this endpoint takes client tools ({name, description, input_schema})",
            )
        schema = tool.get("input_schema")
        out.append(tool_definition(tool.get("name"), tool.get("description"), schema, index))
    return out


def _messages(value: list[Any], earlier: Decoded | None) -> Decoded:
    """``value`` decoded, on ``earlier`` (the decoding of its first messages) when given."""
    names: dict[str, str] = {}  # tool_use id → tool name, for the results that answer it
    out: list[ProxyMessage] = []
    start = 0
    if earlier is not None:
        names = dict(earlier.names)
        out = list(earlier.messages)
        start = len(earlier.raw)
    for index in range(start, len(value)):
        message = value[index]
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise InvalidInput("invalid_messages", f"{where} needs role user or assistant")
        content = message.get("content")
        if isinstance(content, str):
            # Plain text, the common case: the blocks the general path below makes of it
            # (an assistant's empty text is no block), without building an answer for it.
            text: list[Block] = [{"type": "text", "text": content}]
            if message["role"] == "user":
                out.append(ProxyMessage("user", text))
            else:
                out.append(ProxyMessage("assistant", text if content else []))
            continue
        if not isinstance(content, list) or not content:
            raise InvalidInput("invalid_messages", f"{where}.content must be text or blocks")
        if message["role"] == "assistant":
            answer = _assistant(content, where)
            names.update((call["id"], call["name"]) for call in answer.tool_calls)
            out.append(ProxyMessage("assistant", answer.assistant_content()))
        else:
            out.extend(_user(content, where, names))
    return Decoded(list(value), out, names)


def _assistant(content: list[Any], where: str) -> ModelResponse:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCallBlock] = []
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        at = f"{where}.content[{index}]"
        if kind == "text":
            texts.append(_text(block, "text", at))
        elif kind == "thinking":
            thinking.append(_text(block, "thinking", at))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise InvalidInput("invalid_messages", f"{at}: a tool_use needs an id and a name")
            if not isinstance(block.get("input"), dict):
                raise InvalidInput("invalid_messages", f"{at}: a tool_use input is an object")
            raw = compact_json(block["input"])
            calls.append({"type": "tool_call", "id": call_id, "name": name, "input": raw})
        elif kind != "redacted_thinking":
            raise _unsupported(at, kind, "text, thinking and tool_use")
    return ModelResponse(
        text="".join(texts),
        thinking="".join(thinking),
        provider_opaque=opaque_thinking([b for b in content if isinstance(b, dict)]),
        tool_calls=calls,
    )


def _user(content: list[Any], where: str, names: Mapping[str, str]) -> list[ProxyMessage]:
    """A user turn: each tool result its own tool message, the other blocks one user message
    (split where a result sits between them, so the order is kept)."""
    out: list[ProxyMessage] = []
    pending: list[Block] = []
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        at = f"{where}.content[{index}]"
        if kind == "tool_result":
            if pending:
                out.append(ProxyMessage("user", pending))
                pending = []
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidInput("invalid_messages", f"{at}: a tool_result needs tool_use_id")
            result: Block = {
                "type": "tool_result",
                "id": call_id,
                "name": names.get(call_id, ""),
                "output": _result_output(block.get("content"), at),
                "state": tool_state(block.get("is_error")),
            }
            out.append(ProxyMessage("tool", [result]))
        else:
            pending.append(_plain(block, kind, at))
    if pending:
        out.append(ProxyMessage("user", pending))
    return out


def _result_output(value: Any, at: str) -> list[OutputBlock]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}] if value else []
    if not isinstance(value, list):
        raise InvalidInput("invalid_messages", f"{at}.content must be text or blocks")
    out: list[OutputBlock] = []
    for index, block in enumerate(value):
        kind = block.get("type") if isinstance(block, dict) else None
        part = _plain(block, kind, f"{at}.content[{index}]")
        assert part["type"] in ("text", "data")  # what ``_plain`` makes
        out.append(part)
    return out


def _plain(block: Any, kind: Any, at: str) -> Any:
    """A text, image or document block as a text or data block."""
    if kind == "text":
        return {"type": "text", "text": _text(block, "text", at)}
    if kind in ("image", "document"):
        return _data(block, kind, at)
    raise _unsupported(at, kind, "text, image, document and tool_result")


def _data(block: Mapping[str, Any], kind: str, at: str) -> Any:
    source = block.get("source")
    where = source.get("type") if isinstance(source, dict) else None
    name = block.get("title") if isinstance(block.get("title"), str) else None
    if isinstance(source, dict) and where == "base64":
        media_type, data = source.get("media_type"), source.get("data")
        if isinstance(data, str) and isinstance(media_type, str):
            return _data_block(
                {"source_type": "base64", "data": data, "media_type": media_type}, name
            )
    elif isinstance(source, dict) and where == "url" and isinstance(source.get("url"), str):
        # A document URL is a PDF (the only URL document the API takes); an image's type is
        # the fetched file's.
        media_type = PDF_MEDIA_TYPE if kind == "document" else None
        return _data_block(
            {"source_type": "url", "url": source["url"], "media_type": media_type}, name
        )
    elif isinstance(source, dict) and where == "file" and isinstance(source.get("file_id"), str):
        return _data_block({"source_type": "file_id", "id": source["file_id"]}, name)
    elif isinstance(source, dict) and where == "text" and isinstance(source.get("data"), str):
        return {"type": "text", "text": source["data"]}  # a plain-text document is its text
    raise _unsupported(at, f"{kind} with a {where!r} source", "base64, url, file and text sources")


def _data_block(source: Any, name: str | None) -> DataBlock:
    return {"type": "data", "source": source, "name": name}


def _text(block: Mapping[str, Any], key: str, at: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise InvalidInput("invalid_messages", f"{at}.{key} must be a string")
    return value


def _unsupported(at: str, kind: Any, supported: str) -> InvalidInput:
    return InvalidInput(
        "unsupported_block",
        f"{at} is a {kind!r:.60} block, which this endpoint cannot hold; it takes {supported}",
    )
