"""``TurnOut``, ``TurnPage`` and ``ToolResultsOut`` from the turn service's results (spec §16)."""

from __future__ import annotations

from typing import Any

from app.services.turns.mailbox import QueuedMessage
from app.services.turns.service import TurnList
from app.services.turns.views import awaiting_calls, iso
from app.services.turns.waiting import tool_results_remaining
from app.storage.models import Turn

__all__ = ["queued_message_json", "tool_results_json", "turn_json", "turn_page_json"]


def turn_json(turn: Turn) -> dict[str, Any]:
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


def turn_page_json(page: TurnList) -> dict[str, Any]:
    return {"turns": [turn_json(t) for t in page.turns], "next_cursor": page.next_cursor}


def tool_results_json(turn: Turn) -> dict[str, Any]:
    """The turn after a post of tool results, and the calls still without one."""
    body = turn_json(turn)
    body["missing_tool_call_ids"] = [c["tool_call_id"] for c in awaiting_calls(turn)]
    return body


def queued_message_json(queued: QueuedMessage) -> dict[str, Any]:
    """``AgentMessageOut``: the message waits in the mailbox for the next model call."""
    return {
        "agent_message_id": queued.agent_message_id,
        "status": "queued",
        "duplicate": queued.duplicate,
        "tokens": queued.tokens,
    }
