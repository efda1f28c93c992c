"""JSON shapes of checkpoints, projection items and transcript messages (spec §17)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from app.core.compaction.shrink import shrink_notice
from app.core.content import Item, RealOrigin
from app.storage.models import Compaction

__all__ = [
    "checkpoint_summary_json",
    "checkpoint_to_json",
    "item_to_json",
    "new_compaction_id",
    "timestamp",
]


def new_compaction_id() -> str:
    return f"cmp-{uuid.uuid4().hex}"


def timestamp(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def checkpoint_summary_json(row: Compaction) -> dict[str, Any]:
    """Everything about a checkpoint except its texts (the list view)."""
    before, after = row.conversation_tokens_before, row.conversation_tokens_after
    reclaimed = max(before - after, 0) if before is not None and after is not None else None
    return {
        "compaction_id": row.compaction_id,
        "session_id": row.session_id,
        "sequence": row.sequence,
        "kind": row.kind,
        "through_message_sequence": row.through_message_sequence,
        "replaced_through_message_sequence": row.replaced_through_message_sequence,
        "source_message_count": row.source_message_count,
        "last_user_message_id": row.last_user_message_id,
        "last_user_message_sequence": row.last_user_message_sequence,
        "summary_format_version": row.summary_format_version,
        "model": row.model,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "trigger_turn_id": row.trigger_turn_id,
        "trigger_prepare_id": row.trigger_prepare_id,
        "parent_compaction_id": row.parent_compaction_id,
        "trigger": row.trigger,
        "attempts": row.attempts,
        "timings": {
            "prepare_ms": row.prepare_ms,
            "summary_ms": row.summary_ms,
            "persistence_ms": row.persistence_ms,
            "install_ms": row.install_ms,
        },
        "conversation_tokens_before": before,
        "conversation_tokens_after": after,
        "reclaimed_conversation_tokens": reclaimed,
        "shrunk": after < before if before is not None and after is not None else None,
        "notice": shrink_notice(row.kind, before, after),
        "created_at": timestamp(row.created_at),
    }


def checkpoint_to_json(row: Compaction) -> dict[str, Any]:
    """One checkpoint in full: summary, runtime state and reminder included."""
    return {
        **checkpoint_summary_json(row),
        "summary": row.summary,
        "runtime_state": row.runtime_state,
        "runtime_reminder": row.runtime_reminder,
    }


def item_to_json(item: Item) -> dict[str, Any]:
    """A projection item with its origin (real row or synthetic compaction item)."""
    origin = item.origin
    origin_json: dict[str, Any]
    if isinstance(origin, RealOrigin):
        origin_json = {
            "type": "real",
            "message_id": origin.message_id,
            "sequence": origin.sequence,
        }
    else:
        origin_json = {
            "type": "synthetic",
            "compaction_id": origin.compaction_id,
            "reason": origin.reason,
            "source_message_id": origin.source_message_id,
            "source_sequence": origin.source_sequence,
        }
    return {"role": item.role, "kind": item.kind, "content": item.content, "origin": origin_json}
