"""Small builders for conversation items, shared by the core tests."""

from __future__ import annotations

from app.core.content import (
    Artifact,
    Block,
    DataBlock,
    Item,
    Kind,
    OutputBlock,
    RealOrigin,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    text_block,
)
from app.core.pipeline.prepared_call import SystemPart, ToolDefinition


def user(
    text: str, *, mid: str | None = None, seq: int | None = None, kind: Kind = "normal"
) -> Item:
    return Item("user", kind, [text_block(text)], RealOrigin(mid, seq))


def call(call_id: str, name: str = "read", arguments: str = "{}") -> ToolCallBlock:
    return {"type": "tool_call", "id": call_id, "name": name, "input": arguments}


def assistant(
    text: str = "", *calls: ToolCallBlock, mid: str | None = None, seq: int | None = None
) -> Item:
    content: list[Block] = [text_block(text)] if text else []
    content.extend(calls)
    return Item("assistant", "normal", content, RealOrigin(mid, seq))


def data_block(url: str = "https://example.com/a.png", name: str | None = "a.png") -> DataBlock:
    return {
        "type": "data",
        "source": {"source_type": "url", "url": url, "media_type": "image/png"},
        "name": name,
    }


def result_block(
    call_id: str,
    *output: str | OutputBlock,
    name: str = "read",
    state: ToolResultState = "success",
    artifacts: list[Artifact] | None = None,
) -> ToolResultBlock:
    blocks: list[OutputBlock] = [text_block(o) if isinstance(o, str) else o for o in output]
    block: ToolResultBlock = {
        "type": "tool_result",
        "id": call_id,
        "name": name,
        "output": blocks,
        "state": state,
    }
    if artifacts is not None:
        block["artifacts"] = artifacts
    return block


def tool(
    call_id: str,
    *output: str | OutputBlock,
    name: str = "read",
    mid: str | None = None,
    seq: int | None = None,
    artifacts: list[Artifact] | None = None,
) -> Item:
    block = result_block(call_id, *output, name=name, artifacts=artifacts)
    return Item("tool", "normal", [block], RealOrigin(mid, seq))


def part(key: str, text: str) -> SystemPart:
    return SystemPart(key, [text_block(text)])


def tool_def(name: str, description: str = "d") -> ToolDefinition:
    return {"name": name, "description": description, "input_schema": {"type": "object"}}


def result_text(item: Item) -> str:
    """The text of a tool item's single result (text blocks joined by nothing)."""
    block = item.content[0]
    assert block["type"] == "tool_result"
    return "".join(b["text"] for b in block["output"] if b["type"] == "text")
