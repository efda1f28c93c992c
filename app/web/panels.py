"""The context map's panels beside the window: turns, checkpoints, a checkpoint's transcript and
the session's pins, as typed views of what the services answer (``app.web.views`` arranges the
page; this module builds its panels)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.content import Item
from app.core.pins import MAX_PINNED_BYTES, Pin, render_pins
from app.core.world_state import PINNED_CONTEXT, retained_sections
from app.services.inspection import Inspection
from app.services.pins import PinList, PinRecord, ProposalRecord
from app.web.blocks import BlockView, block_view, clip, preview

__all__ = [
    "CheckpointView",
    "PinsView",
    "TranscriptMessage",
    "TurnView",
    "checkpoint_view",
    "pins_view",
    "transcript_message",
    "turn_view",
]


@dataclass(frozen=True, slots=True)
class CheckpointView:
    compaction_id: str
    sequence: int
    kind: str
    created_at: str
    tokens_before: int | None
    tokens_after: int | None
    reclaimed: int | None
    through_message_sequence: int
    replaced_through_message_sequence: int
    source_message_count: int
    model: str | None
    installed: bool  # the checkpoint in force


@dataclass(frozen=True, slots=True)
class TurnView:
    turn_id: str
    status: str
    phase: str
    request: str
    outcome: str
    model_calls: int
    input_tokens: int
    output_tokens: int
    created_at: str
    finished_at: str | None


@dataclass(frozen=True, slots=True)
class TranscriptMessage:
    sequence: int
    message_id: str
    role: str
    kind: str
    created_at: str
    preview: str
    blocks: list[BlockView]


@dataclass(frozen=True, slots=True)
class PinsView:
    pins: list[PinRecord]
    total_bytes: int
    max_total_bytes: int
    proposals: list[str]  # the open proposals' texts, newest first
    # Positions of the rows that carry the pinned context (World State); none: it goes with
    # the next model call's sample.
    rows: list[int]
    current: bool  # the latest of those rows says what is pinned now


def turn_view(turn: Mapping[str, Any]) -> TurnView:
    request = " ".join(
        i.get("text") or f"/{i.get('name')}" for i in turn.get("input") or [] if isinstance(i, dict)
    )
    outcome = turn.get("outcome") or {}
    if turn["status"] == "completed":
        said = str(outcome.get("final_text") or "")
    elif outcome.get("code"):
        said = f"{outcome['code']}: {outcome.get('message') or ''}".strip()
    else:
        said = ""
    usage = turn.get("usage") or {}
    return TurnView(
        turn_id=turn["turn_id"],
        status=turn["status"],
        phase=turn["phase"],
        request=clip(request),
        outcome=clip(said),
        model_calls=turn.get("model_calls", 0),
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        created_at=turn["created_at"],
        finished_at=turn.get("finished_at"),
    )


def checkpoint_view(row: Mapping[str, Any], installed: str | None) -> CheckpointView:
    return CheckpointView(
        compaction_id=row["compaction_id"],
        sequence=row["sequence"],
        kind=row["kind"],
        created_at=row["created_at"],
        tokens_before=row["conversation_tokens_before"],
        tokens_after=row["conversation_tokens_after"],
        reclaimed=row["reclaimed_conversation_tokens"],
        through_message_sequence=row["through_message_sequence"],
        replaced_through_message_sequence=row["replaced_through_message_sequence"],
        source_message_count=row["source_message_count"],
        model=row["model"],
        installed=row["compaction_id"] == installed,
    )


def transcript_message(message: Mapping[str, Any]) -> TranscriptMessage:
    return TranscriptMessage(
        sequence=message["sequence"],
        message_id=message["message_id"],
        role=message["role"],
        kind=message["kind"],
        created_at=message["created_at"],
        preview=preview(message["content"]),
        blocks=[block_view(b) for b in message["content"]],
    )


def _text(item: Item) -> str:
    return "".join(b["text"] for b in item.content if b["type"] == "text")


def pins_view(
    pins: PinList, proposals: Sequence[ProposalRecord], inspection: Inspection
) -> PinsView:
    items = inspection.prepared.items
    rows = [
        position
        for position, item in enumerate(items, start=1)
        if item.kind == "world_state" and PINNED_CONTEXT in retained_sections([item])
    ]
    # What the latest of them says is what is pinned now, or the next sample sends the change.
    body = render_pins([Pin(p.kind, p.text) for p in pins.pins])
    last = _text(items[rows[-1] - 1]) if rows else None
    return PinsView(
        pins=pins.pins,
        total_bytes=pins.total_bytes,
        max_total_bytes=MAX_PINNED_BYTES,
        proposals=[p.text for p in proposals],
        rows=rows,
        current=last is not None and body is not None and last.endswith(body),
    )
