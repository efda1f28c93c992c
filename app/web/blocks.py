"""Content blocks as a person reads them: a title and a body per block, and a one-line preview."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.content import compact_json

__all__ = ["PREVIEW_CHARS", "BlockView", "block_view", "clip", "preview"]

PREVIEW_CHARS = 140


@dataclass(frozen=True, slots=True)
class BlockView:
    type: str
    title: str
    body: str


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=2)
    except RecursionError:  # a stored value too deep to indent: shown compact (any depth)
        return compact_json(value)


def block_view(block: Mapping[str, Any]) -> BlockView:
    kind = str(block.get("type"))
    if kind in ("text", "thinking"):
        return BlockView(kind, kind, str(block.get(kind, "")))
    if kind == "tool_call":
        return BlockView(kind, f"tool call {block['name']} · {block['id']}", str(block["input"]))
    if kind == "tool_result":
        title = f"tool result {block['name']} · {block['id']} · {block['state']}"
        body = "\n".join(_output_text(b) for b in block.get("output", []))
        return BlockView(kind, title, body)
    if kind == "data":
        return BlockView(kind, "data", _output_text(block))
    if kind == "provider_opaque":
        title = f"provider data {block.get('driver')}/{block.get('kind')}"
        return BlockView(kind, title, _text(block.get("payload")))
    return BlockView(kind, kind, _text(dict(block)))


def _output_text(block: Mapping[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    source = block.get("source") or {}
    where = source.get("url") or source.get("id") or f"{len(source.get('data', ''))} base64 chars"
    return f"[data {block.get('name') or ''} {source.get('media_type') or ''} {where}]"


def preview(content: Sequence[Mapping[str, Any]]) -> str:
    return clip(" ".join(_preview_text(b) for b in content))


def _preview_text(block: Mapping[str, Any]) -> str:
    if block.get("type") == "tool_call":
        return f"{block['name']}({block['input']})"
    return block_view(block).body


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
