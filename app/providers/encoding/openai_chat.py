"""Encode a prepared request as an OpenAI Chat Completions body (``POST {base}/chat/completions``).

Sources, consulted 2026-11-30 through the project's documentation search:
the OpenAI API reference (platform.openai.com/docs/api-reference/chat)
and its OpenAPI description (``CreateChatCompletionRequest``, ``ChatCompletionRequestMessage``,
``ChatCompletionStreamOptions``):
- messages: ``system`` (string or text parts), ``user`` (string or parts: ``text``,
  ``image_url {url}``, ``file {filename, file_data}``), ``assistant`` (``content`` string, parts or
  null, plus ``tool_calls [{id, type:"function", function:{name, arguments}}]`` whose
  ``arguments`` is a JSON *string*), ``tool`` (``tool_call_id`` + string or text parts);
- ``tools: [{type:"function", function:{name, description, parameters}}]`` (omitted when empty);
- ``max_completion_tokens`` (``max_tokens`` is deprecated and refused by reasoning models);
- streaming: ``stream: true`` with ``stream_options: {include_usage: true}`` so the last chunk
  carries the usage.

Decisions (docs/ may restate them): a message made of exactly one text block is sent as a plain
string (what every OpenAI-compatible server accepts), anything else as a list of parts; thinking
and provider_opaque blocks are dropped (Chat Completions has no way to echo reasoning back);
images become ``image_url`` parts (base64 as a ``data:`` URL), base64 PDFs ``file`` parts, every
other attachment a text note. A tool message has no field for the result's state, so a
non-success result's content starts with its state line and an empty one says so
(``app.core.tool_state``, spec §9): the model always sees that a call failed, was denied or was
interrupted, and no tool message is sent empty. The same request always yields the same body
(dict order is fixed here).

Caching (``caching``, a ``CachePlan`` of ``app.core.caching.breakpoints``): OpenAI caches prompt
prefixes by
itself; the plan's ``cache_key`` is sent as the top-level ``prompt_cache_key`` (after
``max_completion_tokens``) so a session's calls are routed to the same cache. Without a plan
the body is exactly what it was before caching existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import Block, DataBlock, ToolResultBlock
from app.core.tool_state import NO_OUTPUT_TEXT, has_output, state_line
from app.providers.encoding._common import PDF_MEDIA_TYPE, attachment_note, is_image

__all__ = ["chat_message", "encode_openai_chat", "only_tool_result", "tool_result_body"]


def encode_openai_chat(
    request: Mapping[str, Any],
    *,
    model: str | None = None,
    stream: bool = False,
    caching: CachePlan | None = None,
) -> dict[str, Any]:
    """The Chat Completions body for a prepared ``request`` (messages, tools, max_output_tokens),
    with the ``prompt_cache_key`` of ``caching`` when it has one."""
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    body["messages"] = [chat_message(m) for m in request["messages"]]
    tools = request.get("tools") or []
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            }
            for t in tools
        ]
    if request.get("max_output_tokens") is not None:
        body["max_completion_tokens"] = request["max_output_tokens"]
    if caching is not None and caching.cache_key is not None:
        body["prompt_cache_key"] = caching.cache_key
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    # The caller's sampling fields on the proxy path (``encoding/sampling.py``), last:
    # the prefix a provider caches is the same bytes with them or without.
    body.update(request.get("extra") or ())
    return body


def chat_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One prepared message as a Chat Completions message."""
    role = message["role"]
    content: Sequence[Block] = message["content"]
    if role == "tool":
        return _tool_message(content)
    if role == "assistant":
        return _assistant_message(content)
    if role not in ("system", "user"):
        raise ValueError(f"unknown message role {role!r}")
    parts = _content_parts(content)
    return {"role": role, "content": _parts_or_string(parts) if parts else ""}


def _assistant_message(content: Sequence[Block]) -> dict[str, Any]:
    parts = _content_parts(content)
    tool_calls = [
        {
            "id": b["id"],
            "type": "function",
            # The model's raw JSON text is echoed verbatim; only an empty one is normalized,
            # because an empty string is not JSON and some servers reject it.
            "function": {"name": b["name"], "arguments": b["input"] or "{}"},
        }
        for b in content
        if b["type"] == "tool_call"
    ]
    out: dict[str, Any] = {"role": "assistant"}
    if parts:
        out["content"] = _parts_or_string(parts)
    else:
        # ``null`` is the documented value for a tool-call-only turn; an empty string otherwise.
        out["content"] = None if tool_calls else ""
    if tool_calls:
        out["tool_calls"] = tool_calls
    return out


def _tool_message(content: Sequence[Block]) -> dict[str, Any]:
    result = only_tool_result(content)
    return {"role": "tool", "tool_call_id": result["id"], "content": tool_result_body(result)}


def only_tool_result(content: Sequence[Block]) -> ToolResultBlock:
    """The one tool_result block of a tool message (spec §1)."""
    results = [b for b in content if b["type"] == "tool_result"]
    if len(results) != 1:
        raise ValueError("a tool message must hold exactly one tool_result block")
    return results[0]


def tool_result_body(result: ToolResultBlock) -> str | list[dict[str, Any]]:
    """What a tool result says to an OpenAI model: one string, or text parts when it has
    several blocks, the state line first for a non-success result (spec §9)."""
    parts: list[dict[str, Any]] = []
    for block in result["output"]:
        if block["type"] == "text":
            parts.append({"type": "text", "text": block["text"]})
        else:
            # Tool messages accept text only.
            parts.append({"type": "text", "text": attachment_note(block)})
    line = state_line(result["state"])
    body: str | list[dict[str, Any]]
    if not has_output(result["output"]):
        body = line or NO_OUTPUT_TEXT
    elif line is None:
        body = _parts_or_string(parts)
    elif len(parts) == 1:
        # One string, as most servers expect of a tool message.
        body = f"{line}\n{parts[0]['text']}"
    else:
        body = [{"type": "text", "text": line}, *parts]
    return body


def _content_parts(content: Sequence[Block]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif block["type"] == "data":
            parts.append(_data_part(block))
        # thinking, provider_opaque: nothing to send; tool_call: handled by the caller.
    return parts


def _data_part(block: DataBlock) -> dict[str, Any]:
    source = block["source"]
    kind = source["source_type"]
    if kind == "file_id":
        return {"type": "text", "text": attachment_note(block)}
    if is_image(block):
        if kind == "url":
            url = source.get("url", "")
        else:
            url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "base64" and source.get("media_type") == PDF_MEDIA_TYPE:
        data_url = f"data:{PDF_MEDIA_TYPE};base64,{source.get('data', '')}"
        return {
            "type": "file",
            "file": {"filename": block.get("name") or "document.pdf", "file_data": data_url},
        }
    return {"type": "text", "text": attachment_note(block)}


def _parts_or_string(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts
