"""Encode a prepared request as an Anthropic Messages body (``POST {base}/v1/messages``).

Sources, consulted 2026-11-30 through the project's documentation search:
the Anthropic API reference (docs.anthropic.com/en/api/messages,
"Messages streaming", "Extended thinking", "Tool use", "Vision", "PDF support"):
- ``system`` is top level: a list of ``{type:"text", text}`` blocks (omitted when empty);
- ``messages`` alternate ``user`` / ``assistant``; consecutive messages of the same role are merged
  into one (the API folds them the same way, sending them merged keeps the body explicit);
- tool calls are ``tool_use {id, name, input}`` with ``input`` an *object*; tool results are
  ``tool_result {tool_use_id, content, is_error}`` blocks inside a user message, before any text;
- ``thinking {thinking, signature}`` / ``redacted_thinking {data}`` blocks must be echoed
  unmodified (and first) in an assistant message, which needs the signature;
- images: ``image {source: base64 {media_type, data} | url {url}}``; PDFs: ``document`` with the
  same sources; text blocks must not be empty; every message needs non-empty content;
- ``max_tokens`` is required; ``stream: true`` asks for server-sent events.

Decisions: the signature of a thinking block travels in a ``provider_opaque`` block of driver
``anthropic`` (see ``app.providers.anthropic_messages``): kind ``thinking`` with payload
``{"signature"}`` (the text is the message's thinking block) or ``{"thinking", "signature"}``
(several thinking blocks in one response), kind ``redacted_thinking`` with payload ``{"data"}``.
Thinking without a signature, and provider_opaque blocks of any other driver or kind, are
dropped. Tool results whose state is ``error``, ``denied`` or ``interrupted`` get
``is_error: true`` and their state line as the first content block, a result without output the
``[no output]`` text (``app.core.tool_state``, spec §9): ``is_error`` alone does not tell a denied
call from a failed one, and the same added text in both encodings is what the exact counters
count. Attachments other than images and PDFs (and ``file_id`` sources, which name
provider-specific files) become a text note. Messages left empty after that are omitted.

Cache breakpoints (``caching``, a ``CachePlan`` of ``app.core.caching.breakpoints``):
``cache_control:
{"type": "ephemeral"}`` is added, as the block's last key, to the last tool definition, the last
system block and, for each planned request message, the last block that came from that message
(consecutive messages of a role merge into one turn, so that block may sit mid-turn). Thinking
blocks cannot carry ``cache_control``: a message whose blocks are all thinking, or that encodes
to none, is not marked. Without a plan the body is exactly what it was before caching existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import Block, DataBlock, OutputBlock, ProviderOpaqueBlock, ToolResultBlock
from app.core.tool_state import NO_OUTPUT_TEXT, state_line
from app.providers.encoding._common import (
    PDF_MEDIA_TYPE,
    attachment_note,
    is_image,
    parse_tool_input,
)

__all__ = [
    "ANTHROPIC_DRIVER",
    "CACHE_CONTROL",
    "encode_anthropic_messages",
    "marked_blocks",
    "message_blocks",
    "opaque_thinking",
]

# The ``driver`` of the provider_opaque blocks this encoding echoes back.
ANTHROPIC_DRIVER = "anthropic"
# The one marker this encoding places (the default five-minute lifetime).
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def encode_anthropic_messages(
    request: Mapping[str, Any],
    *,
    model: str | None = None,
    stream: bool = False,
    caching: CachePlan | None = None,
) -> dict[str, Any]:
    """The Messages body for ``request`` (``{"messages", "tools", "max_output_tokens"}``), with
    the breakpoints of ``caching`` (``None``: no marker)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    marked = frozenset(caching.message_breakpoints) if caching is not None else frozenset()
    for index, message in enumerate(request["messages"]):
        role_out, blocks = message_blocks(message)
        if index in marked and role_out != "system":  # the system's end is ``mark_system``
            blocks = marked_blocks(blocks)
        if role_out == "system":
            system.extend(blocks)
        elif not blocks:
            continue
        elif turns and turns[-1]["role"] == role_out:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role_out, "content": blocks})

    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    if request.get("max_output_tokens") is not None:
        body["max_tokens"] = request["max_output_tokens"]
    if system:
        if caching is not None and caching.mark_system:
            system[-1] = {**system[-1], "cache_control": dict(CACHE_CONTROL)}
        body["system"] = system
    body["messages"] = turns
    tools = request.get("tools") or []
    if tools:
        body["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
            for t in tools
        ]
        if caching is not None and caching.mark_tools:
            body["tools"][-1]["cache_control"] = dict(CACHE_CONTROL)
    if stream:
        body["stream"] = True
    # The caller's sampling fields on the proxy path (``encoding/sampling.py``), last:
    # the prefix a provider caches is the same bytes with them or without.
    body.update(request.get("extra") or ())
    return body


def marked_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``blocks`` with ``cache_control`` on the last one that may carry it (not thinking), or
    unchanged when none may; the blocks themselves are copied, never changed."""
    for position in range(len(blocks) - 1, -1, -1):
        if blocks[position]["type"] not in _UNMARKABLE:
            marked = list(blocks)
            marked[position] = {**blocks[position], "cache_control": dict(CACHE_CONTROL)}
            return marked
    return blocks


def message_blocks(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """One prepared message on the wire: ``system`` (its blocks go to the top-level ``system``),
    ``user`` or ``assistant``, and its blocks (none: the message is omitted). Consecutive
    messages of the same wire role form one turn."""
    role = message["role"]
    content: Sequence[Block] = message["content"]
    if role == "system":
        return "system", _plain_blocks(content)
    if role == "assistant":
        return "assistant", _assistant_blocks(content)
    if role == "tool":
        return "user", _tool_result_blocks(content)
    if role == "user":
        return "user", _plain_blocks(content)
    raise ValueError(f"unknown message role {role!r}")


def opaque_thinking(blocks: Sequence[Mapping[str, Any]]) -> list[ProviderOpaqueBlock]:
    """The ``provider_opaque`` blocks that keep the signed ``thinking`` and ``redacted_thinking``
    blocks of one answer (wire-shaped, in answer order; other blocks are skipped) for echoing back:
    the way back of ``_assistant_blocks``.

    With a single thinking block its text already is the message's thinking block, so only the
    signature is kept; with several, each keeps its own text so each signature stays paired.
    """
    single = sum(1 for b in blocks if b.get("type") == "thinking") == 1
    out: list[ProviderOpaqueBlock] = []
    for block in blocks:
        kind = block.get("type")
        signature, data = block.get("signature"), block.get("data")
        if kind == "thinking" and isinstance(signature, str) and signature:
            payload: dict[str, Any] = {"signature": signature}
            if not single:
                payload = {"thinking": block.get("thinking", ""), "signature": signature}
            out.append(_opaque("thinking", payload))
        elif kind == "redacted_thinking" and isinstance(data, str) and data:
            out.append(_opaque("redacted_thinking", {"data": data}))
    return out


def _opaque(kind: str, payload: dict[str, Any]) -> ProviderOpaqueBlock:
    return {"type": "provider_opaque", "driver": ANTHROPIC_DRIVER, "kind": kind, "payload": payload}


def _plain_blocks(content: Sequence[Block]) -> list[dict[str, Any]]:
    """Text and attachments; anything else has no place in a user or system turn."""
    out: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "text":
            if block["text"]:
                out.append({"type": "text", "text": block["text"]})
        elif block["type"] == "data":
            out.append(_data_block(block))
    return out


def _assistant_blocks(content: Sequence[Block]) -> list[dict[str, Any]]:
    thinking_text = "".join(b["thinking"] for b in content if b["type"] == "thinking")
    out: list[dict[str, Any]] = []
    # Thinking first: the API requires the signed blocks ahead of text and tool_use.
    for block in content:
        if block["type"] != "provider_opaque" or block["driver"] != ANTHROPIC_DRIVER:
            continue
        payload = block["payload"]
        if not isinstance(payload, dict):
            continue
        if block["kind"] == "thinking" and isinstance(payload.get("signature"), str):
            text = payload.get("thinking", thinking_text)
            if isinstance(text, str):
                signature = payload["signature"]
                out.append({"type": "thinking", "thinking": text, "signature": signature})
        elif block["kind"] == "redacted_thinking" and isinstance(payload.get("data"), str):
            out.append({"type": "redacted_thinking", "data": payload["data"]})
    for block in content:
        if block["type"] == "text" and block["text"]:
            out.append({"type": "text", "text": block["text"]})
        elif block["type"] == "data":
            out.append({"type": "text", "text": attachment_note(block)})
    for block in content:
        if block["type"] == "tool_call":
            out.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": parse_tool_input(block["input"]),
                }
            )
    return out


def _tool_result_blocks(content: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "tool_result":
            out.append(_tool_result(block))
    return out


def _tool_result(result: ToolResultBlock) -> dict[str, Any]:
    encoded: dict[str, Any] = {"type": "tool_result", "tool_use_id": result["id"]}
    parts = _output_blocks(result["output"])
    line = state_line(result["state"])
    if line is not None:
        parts.insert(0, {"type": "text", "text": line})
    elif not parts:
        parts.append({"type": "text", "text": NO_OUTPUT_TEXT})
    encoded["content"] = parts
    if line is not None:
        encoded["is_error"] = True
    return encoded


def _output_blocks(output: Sequence[OutputBlock]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in output:
        if block["type"] == "text":
            if block["text"]:
                out.append({"type": "text", "text": block["text"]})
        else:
            out.append(_data_block(block))
    return out


def _data_block(block: DataBlock) -> dict[str, Any]:
    source = block["source"]
    kind = source["source_type"]
    media_type = source.get("media_type")
    if kind == "file_id":
        return {"type": "text", "text": attachment_note(block)}
    if kind == "url":
        wire_source: dict[str, Any] = {"type": "url", "url": source.get("url", "")}
    else:
        wire_source = {"type": "base64", "media_type": media_type, "data": source.get("data", "")}
    if is_image(block):
        return {"type": "image", "source": wire_source}
    if media_type == PDF_MEDIA_TYPE:
        return {"type": "document", "source": wire_source}
    return {"type": "text", "text": attachment_note(block)}
