"""Prepared requests (the provider-independent shape of spec §2.4) shared by encoding tests."""

from __future__ import annotations

from typing import Any

from app.core.content import Block, DataBlock, ToolCallBlock, ToolResultBlock, ToolResultState

READ_TOOL = {
    "name": "read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "read", raw: str = '{"path":"a.py"}') -> ToolCallBlock:
    return {"type": "tool_call", "id": call_id, "name": name, "input": raw}


def result(
    call_id: str, output: str = "ok", state: ToolResultState = "success", name: str = "read"
) -> ToolResultBlock:
    return {
        "type": "tool_result",
        "id": call_id,
        "name": name,
        "output": [{"type": "text", "text": output}],
        "state": state,
    }


def image_b64(data: str = "iVBORw0K", media_type: str = "image/png") -> DataBlock:
    return {
        "type": "data",
        "source": {"source_type": "base64", "data": data, "media_type": media_type},
        "name": "shot.png",
    }


def msg(role: str, *blocks: Any) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


def prepared(*messages: dict[str, Any], tools: list[Any] | None = None) -> dict[str, Any]:
    return {"messages": list(messages), "tools": tools or [], "max_output_tokens": 400}


def agent_loop() -> dict[str, Any]:
    """System part, a user request, an assistant turn with two tool calls, both results, and a
    world-state user message after them."""
    return prepared(
        msg("system", text("You are terse.")),
        msg("user", text("Read a.py and b.py")),
        msg(
            "assistant",
            {"type": "thinking", "thinking": "two reads"},
            text("Reading both."),
            call("c1"),
            call("c2", raw='{"path":"b.py"}'),
        ),
        msg("tool", result("c1", "print(1)")),
        msg("tool", result("c2", "no such file", state="error")),
        msg("user", text("<sandbox_policy>\nmode: auto\n</sandbox_policy>")),
        tools=[READ_TOOL],
    )
