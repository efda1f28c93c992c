"""What a turn row shows a reader: its timestamps and the calls it waits for
(``app/api/render/turns.py`` writes the JSON)."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from app.services.turns.calls import stored_entries
from app.storage.models import Turn

__all__ = ["AwaitingCall", "awaiting_calls", "iso"]


class AwaitingCall(TypedDict):
    tool_call_id: str
    name: str
    input: object  # the model's arguments as stored (raw JSON text)


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def awaiting_calls(turn: Turn) -> list[AwaitingCall]:
    """Caller-executed calls still waiting for their result, in the provider's order."""
    return [
        {"tool_call_id": c["tool_call_id"], "name": c["name"], "input": c["input"]}
        for c in stored_entries(turn.pending_tool_calls)
        if c.get("caller") and c.get("result") is None
    ]
