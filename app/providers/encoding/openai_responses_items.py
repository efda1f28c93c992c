"""OpenAI Responses input items as the service's messages: the way back of the Responses encoding.

A client that keeps its conversation as Responses items (the OpenAI Agents SDK's ``Session``, a
caller of ``POST /v1/responses``) hands them over as they are; each becomes the message the
encoding (``app.providers.encoding.openai_responses``) turns back into the same item:

- ``message`` with role ``user`` (``content`` a string or ``input_text`` / ``input_image`` /
  ``input_file`` parts) → a user message of text and data blocks;
- ``message`` with role ``assistant`` (a string, or ``output_text`` / ``refusal`` parts, with or
  without the ``id`` and ``status`` of an output item) → the text of an assistant message;
- ``reasoning`` → a ``provider_opaque`` block (driver ``openai_responses``, kind ``reasoning``)
  holding the item verbatim, and its summary text as the message's thinking;
- ``function_call`` → a ``tool_call`` block (``call_id``, ``name``, ``arguments`` verbatim);
- ``function_call_output`` → a tool message with one successful ``tool_result`` (its text, or
  its ``input_text`` / ``input_image`` / ``input_file`` parts).

Consecutive answer items (assistant text, reasoning, function calls) form one assistant message,
as one model response stores one, in the order the content model fixes (thinking, text, opaque,
calls); an item that would break that order (text after a call) starts the next message.
Anything else — ``system`` and ``developer`` messages (the System Context is the agent's system
prompt), hosted tools' calls (web or file search, computer use, code interpreter, MCP, shell),
custom tools, item references — has no place in the content model and is refused with
``unsupported_item``, naming its index and type, before anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.content import Block, DataBlock, OutputBlock
from app.core.errors import InvalidInput
from app.providers.encoding.openai_responses import RESPONSES_DRIVER

__all__ = ["ConvertedMessage", "items_to_messages"]

_SUPPORTED = "user and assistant messages, reasoning, function_call and function_call_output"


@dataclass(slots=True)
class ConvertedMessage:
    role: str  # user | assistant | tool
    content: list[Block] = field(default_factory=list)


@dataclass(slots=True)
class _Answer:
    """The assistant message being gathered, by section (the content model's order)."""

    thinking: list[str] = field(default_factory=list)
    text: list[Block] = field(default_factory=list)
    opaque: list[Block] = field(default_factory=list)
    calls: list[Block] = field(default_factory=list)

    def blocks(self) -> list[Block]:
        thinking: list[Block] = [{"type": "thinking", "thinking": "".join(self.thinking)}]
        return [*(thinking if self.thinking else []), *self.text, *self.opaque, *self.calls]


def items_to_messages(
    items: Sequence[Mapping[str, Any]], call_names: Mapping[str, str], *, first_index: int = 0
) -> list[ConvertedMessage]:
    """The messages ``items`` stand for, in order. ``call_names`` names the calls that earlier
    messages opened (a result takes its call's name); ``InvalidInput`` for an item the content
    model cannot hold, naming its index counted from ``first_index`` (``items`` may be a run of
    a longer list)."""
    names = dict(call_names)
    out: list[ConvertedMessage] = []
    answer: _Answer | None = None

    def close() -> None:
        nonlocal answer
        if answer is not None:
            out.append(ConvertedMessage("assistant", answer.blocks()))
            answer = None

    for index, item in enumerate(items, start=first_index):
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role == "assistant":
            if answer is None or answer.calls:
                close()
                answer = _Answer()
            answer.text.extend(_answer_text(item, index))
        elif kind == "reasoning":
            if answer is None or answer.text or answer.calls:
                close()
                answer = _Answer()
            answer.thinking.extend(_summary(item))
            payload = dict(item)
            answer.opaque.append(
                {
                    "type": "provider_opaque",
                    "driver": RESPONSES_DRIVER,
                    "kind": "reasoning",
                    "payload": payload,
                }
            )
        elif kind == "function_call":
            call_id, name = _string(item, "call_id", index), _string(item, "name", index)
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise _refused(index, kind, "its arguments must be the JSON text of the call")
            if answer is None:
                answer = _Answer()
            answer.calls.append(
                {"type": "tool_call", "id": call_id, "name": name, "input": arguments or "{}"}
            )
            names[call_id] = name
        elif kind == "function_call_output":
            close()
            call_id = _string(item, "call_id", index)
            result: Block = {
                "type": "tool_result",
                "id": call_id,
                "name": names.get(call_id, ""),
                "output": _output(item.get("output"), index),
                "state": "success",
            }
            out.append(ConvertedMessage("tool", [result]))
        elif kind == "message" and role == "user":
            close()
            content = item.get("content")
            blocks = _user_content(content, index)
            out.append(ConvertedMessage("user", blocks))
        elif kind == "message":
            raise _refused(
                index,
                f"a {role!r} message",
                "instructions belong to the session's system prompt (agent.system_prompt)",
            )
        else:
            raise _refused(index, repr(kind), f"the service stores {_SUPPORTED}")
    close()
    return out


def _refused(index: int, what: str, why: str) -> InvalidInput:
    return InvalidInput(
        "unsupported_item",
        f"item {index} is {what}, which this session cannot hold: {why}",
        index=index,
    )


def _string(item: Mapping[str, Any], key: str, index: int) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise _refused(index, f"a {item.get('type')} without {key}", f"{key} must be a string")
    return value


def _summary(item: Mapping[str, Any]) -> list[str]:
    return [
        part["text"]
        for part in item.get("summary") or []
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]


def _answer_text(item: Mapping[str, Any], index: int) -> list[Block]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _refused(index, "an assistant message without content", "content is required")
    out: list[Block] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        text = None
        if kind in ("output_text", "input_text"):
            text = part.get("text")
        elif kind == "refusal":
            text = part.get("refusal")
        if not isinstance(text, str):
            raise _refused(index, f"an assistant message with a {kind!r} part", "text only")
        if text:
            out.append({"type": "text", "text": text})
    return out


def _user_content(content: Any, index: int) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _refused(index, "a user message without content", "content is required")
    return [_part(part, index) for part in content]


def _output(output: Any, index: int) -> list[OutputBlock]:
    if isinstance(output, str):
        return [{"type": "text", "text": output}] if output else []
    if not isinstance(output, list):
        raise _refused(index, "a function_call_output without output", "output is required")
    return [_part(part, index) for part in output]


def _part(part: Any, index: int) -> Any:
    """An input part as a text or data block."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        url = part.get("image_url")
        if isinstance(url, str) and url:
            return _data_from_url(url, None)
        if isinstance(part.get("file_id"), str):
            return _file_id(part["file_id"], None)
    if kind == "input_file":
        name = part.get("filename") if isinstance(part.get("filename"), str) else None
        if isinstance(part.get("file_data"), str):
            return _data_from_url(part["file_data"], name)
        if isinstance(part.get("file_id"), str):
            return _file_id(part["file_id"], name)
        if isinstance(part.get("file_url"), str):
            return _data_from_url(part["file_url"], name)
    raise _refused(index, f"a part of type {kind!r}", "parts are text, images and files")


def _data_from_url(url: str, name: str | None) -> DataBlock:
    """A ``data:`` URL is inline base64 (as the encoding writes it); anything else a URL."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "data",
            "source": {"source_type": "base64", "data": data, "media_type": media_type},
            "name": name,
        }
    return {
        "type": "data",
        "source": {"source_type": "url", "url": url, "media_type": None},
        "name": name,
    }


def _file_id(file_id: str, name: str | None) -> DataBlock:
    return {"type": "data", "source": {"source_type": "file_id", "id": file_id}, "name": name}
