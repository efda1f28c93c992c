"""The JSON shape of a turn (``GET .../turns/{id}`` and the start/cancel/tool-results answers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.services.turns.calls import stored_entries
from app.services.turns.waiting import tool_results_remaining
from app.storage.models import Turn

__all__ = ["awaiting_calls", "iso", "turn_to_json"]


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def awaiting_calls(turn: Turn) -> list[dict[str, Any]]:
    """Caller-executed calls still waiting for their result, in the provider's order."""
    return [
        {"tool_call_id": c["tool_call_id"], "name": c["name"], "input": c["input"]}
        for c in stored_entries(turn.pending_tool_calls)
        if c.get("caller") and c.get("result") is None
    ]


def turn_to_json(turn: Turn) -> dict[str, Any]:
    remaining = tool_results_remaining(turn)
    return {
        "turn_id": turn.turn_id,
        "session_id": turn.session_id,
        "client_request_id": turn.client_request_id,
        "status": turn.status,
        # A terminal turn is in the terminal phase, whoever ended it (also a row an older
        # version interrupted without setting it).
        "phase": turn.phase if turn.status == "running" else "terminal",
        "input": turn.input,
        "outcome": turn.outcome,
        "pending_tool_calls": awaiting_calls(turn),
        # While waiting for tool results: by when they must all be posted, and how long is left.
        "tool_results_deadline": iso(turn.tool_results_deadline) if remaining is not None else None,
        "tool_results_remaining_seconds": remaining,
        "plan": turn.plan,
        "model_calls": turn.model_call_index,
        "usage": {
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
            "cached_tokens": turn.cached_tokens,
            "cache_creation_tokens": turn.cache_creation_tokens,
            "reasoning_tokens": turn.reasoning_tokens,
        },
        "cancel_requested": turn.cancel_requested,
        "created_at": iso(turn.created_at),
        "updated_at": iso(turn.updated_at),
        "finished_at": iso(turn.finished_at),
    }
