"""``StoredMessageOut``, ``MessagePage`` and ``AppendResponse`` from stored message records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.api.render.sessions import timestamp
from app.storage.repositories.records import MessagePage, StoredMessage

__all__ = ["appended_json", "message_page_json", "message_ref_json", "stored_json"]


def stored_json(row: StoredMessage) -> dict[str, Any]:
    """A raw stored message, as ``GET .../messages`` and a checkpoint's transcript show it."""
    return {
        "message_id": row.message_id,
        "sequence": row.sequence,
        "role": row.role,
        "kind": row.kind,
        "content": row.content,
        "turn_id": row.turn_id,
        "created_at": timestamp(row.created_at),
    }


def message_page_json(page: MessagePage) -> dict[str, Any]:
    return {
        "messages": [stored_json(m) for m in page.messages],
        "has_more": page.has_more,
        "next_after_sequence": page.next_after_sequence,
    }


def message_ref_json(row: StoredMessage) -> dict[str, Any]:
    """``AppendedMessage``: which stored message."""
    return {"message_id": row.message_id, "sequence": row.sequence}


def appended_json(stored: Sequence[StoredMessage]) -> dict[str, Any]:
    """The ids and sequences of an append, in the batch's order."""
    return {"messages": [message_ref_json(s) for s in stored]}
