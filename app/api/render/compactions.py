"""``CheckpointOut``, ``CheckpointPage``, ``ReplayOut``, ``TranscriptOut`` and ``ReloadOut`` from
the compaction service's results (spec §17)."""

from __future__ import annotations

from typing import Any

from app.api.render.messages import stored_json
from app.api.render.prepare import prepared_json
from app.api.render.sessions import timestamp
from app.core.compaction.shrink import shrink_notice
from app.core.content import Item, RealOrigin
from app.services.compaction.reads import CheckpointPage, Replay, Transcript
from app.services.compaction.service import Reloaded, SummaryRequest
from app.storage.models import Compaction

__all__ = [
    "checkpoint_json",
    "checkpoint_page_json",
    "checkpoint_summary_json",
    "item_json",
    "reload_json",
    "replay_json",
    "summary_request_json",
    "transcript_json",
]


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


def checkpoint_json(row: Compaction) -> dict[str, Any]:
    """One checkpoint in full: summary, runtime state and reminder included."""
    return {
        **checkpoint_summary_json(row),
        "summary": row.summary,
        "runtime_state": row.runtime_state,
        "runtime_reminder": row.runtime_reminder,
    }


def item_json(item: Item) -> dict[str, Any]:
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


def checkpoint_page_json(page: CheckpointPage) -> dict[str, Any]:
    """Newest first; ``next_before_sequence`` pages further back."""
    return {
        "compactions": [checkpoint_summary_json(r) for r in page.compactions],
        "next_before_sequence": page.next_before_sequence,
    }


def replay_json(replay: Replay) -> dict[str, Any]:
    return {
        "selector": replay.selector,
        "compaction_id": replay.compaction_id,
        "through_message_sequence": replay.through_message_sequence,
        "items": [item_json(i) for i in replay.items],
    }


def transcript_json(transcript: Transcript) -> dict[str, Any]:
    """Raw stored messages as ``GET .../messages`` returns them."""
    page = transcript.page
    return {
        "compaction_id": page.compaction_id,
        "through_message_sequence": page.through_message_sequence,
        "messages": [stored_json(m) for m in transcript.messages],
        "has_more": page.has_more,
        "next_after_sequence": page.next_after_sequence,
    }


def summary_request_json(request: SummaryRequest, *, encode_as: str | None) -> dict[str, Any]:
    """The prepare answer of the summary request, and what it covers."""
    result = prepared_json(
        request.prepared,
        encode_as=encode_as,
        model_name=request.model.provider.model_name,
        reasoning=request.model.capabilities.reasoning,
    )
    result["through_message_sequence"] = request.through_message_sequence
    result["summary_model_id"] = request.model.id
    return result


def reload_json(reloaded: Reloaded) -> dict[str, Any]:
    return {
        "session_id": reloaded.session_id,
        "reload_required": False,
        "compaction_id": reloaded.compaction_id,
    }
