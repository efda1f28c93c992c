"""``SessionOut`` and ``SessionPage`` from the session service's views."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.services.sessions import SessionPage, SessionView

__all__ = ["session_json", "session_page_json", "timestamp"]


def timestamp(at: datetime) -> str:
    """An instant as the API writes it: ISO 8601, UTC as ``Z``."""
    return at.isoformat().replace("+00:00", "Z")


def session_json(view: SessionView) -> dict[str, Any]:
    usage = view.usage
    return {
        "id": view.id,
        "title": view.title,
        "model_id": view.model_id,
        "summary_model_id": view.summary_model_id,
        "agent": view.agent,
        "workspace": view.workspace,
        "sandbox": view.sandbox,
        "disabled_skills": view.disabled_skills,
        "tool_result_pruned_through_sequence": view.tool_result_pruned_through_sequence,
        "message_count": view.message_count,
        "last_event_sequence": view.last_event_sequence,
        "reload_required": view.reload_required,
        "origin": view.origin,
        "forked_from": view.forked_from,
        "active_history_tokens": view.active_history_tokens,
        "usage": {
            "turns": usage.turns,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "proxied_calls": usage.proxied_calls,
        },
        "created_at": timestamp(view.created_at),
        "updated_at": timestamp(view.updated_at),
    }


def session_page_json(page: SessionPage) -> dict[str, Any]:
    return {
        "sessions": [session_json(s) for s in page.sessions],
        "next_cursor": page.next_cursor,
    }
