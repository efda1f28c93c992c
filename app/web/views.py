"""What the context map shows, as typed views built from the services' own answers.

Every figure comes from the service the JSON API uses for it (inspection for the context,
the compaction reads for checkpoints, the turn service for turns), so the page and
``GET .../context`` can never disagree; this module only arranges them for a person.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.api.render.sessions import timestamp
from app.core.capabilities import ModelCapabilities
from app.core.content import Item, compact_json
from app.core.pipeline.context_map_marks import message_marks
from app.core.pipeline.prepared_call import Budget
from app.core.pipeline.provenance import Provenance
from app.services.budget import auto_compact_percent
from app.services.calibration import Calibration
from app.services.inspection import Inspection
from app.services.sessions import SessionView
from app.web.blocks import BlockView, block_view, preview
from app.web.panels import CheckpointView, PinsView, TurnView, checkpoint_view, turn_view

__all__ = [
    "CalibrationView",
    "ContextMap",
    "RowView",
    "Segment",
    "SessionRow",
    "WindowBar",
    "context_map",
    "session_rows",
]


@dataclass(frozen=True, slots=True)
class Segment:
    key: str  # CSS class of the bar segment
    label: str
    tokens: int
    share: float  # percent of the window (the bar is the whole window)


@dataclass(frozen=True, slots=True)
class WindowBar:
    window: int
    segments: list[Segment]
    effective_input: int
    line: int  # the auto-compaction line: min(auto_compact_token_limit, effective input)
    line_share: float
    used: int  # estimated input + reserved output: what the line is compared with
    percent: float  # ``auto_compact_percent``
    reaches: bool
    over_by: int  # input tokens beyond the effective input (0 when it fits)


@dataclass(frozen=True, slots=True)
class RowView:
    position: int  # 1-based, in the Conversation
    key: str  # stable across refreshes: keeps an expanded row open
    role: str
    kind: str
    provenance: str  # persisted | synthesized | provided
    origin: str  # "m12 · seq 12", the synthetic reason, or "supplied by the caller"
    tokens: int
    marks: tuple[str, ...]
    preview: str
    blocks: list[BlockView]
    sent_json: str  # the content exactly as sent


@dataclass(frozen=True, slots=True)
class CalibrationView:
    counter: str
    ratio: float
    sample_count: int
    min_ratio: float
    max_ratio: float
    stddev: float
    applied: bool


@dataclass(frozen=True, slots=True)
class ContextMap:
    session_id: str
    title: str | None
    model_id: str
    counter: str
    message_count: int
    reload_required: bool
    last_event_sequence: int
    running: TurnView | None
    # Who made the session (``proxy:<protocol>`` for a compatible endpoint, spec §21) and the
    # session a proxied history was forked from; None for the sessions API.
    origin: str | None
    forked_from: str | None
    bar: WindowBar
    rows: list[RowView]
    conversation_tokens: int
    projection: dict[str, int]
    checkpoints: list[CheckpointView]
    turns: list[TurnView]
    calibration: CalibrationView | None
    pins: PinsView


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: str
    title: str | None
    model_id: str
    message_count: int
    history_tokens: int  # ``active_history_tokens``
    share: float  # the history as a percent of the heaviest session's on the page
    turns: int
    input_tokens: int
    output_tokens: int
    created_at: str
    updated_at: str
    reload_required: bool
    origin: str | None = None
    forked_from: str | None = None


def _share(tokens: int, whole: int) -> float:
    return round(100 * max(tokens, 0) / whole, 3) if whole > 0 else 0.0


def window_bar(budget: Budget, capabilities: ModelCapabilities) -> WindowBar:
    """The window as the model sees it, left to right: what the request holds, the output
    reserved for the answer, the free input room, then the reserves the window never offers
    as input (spec §3.2): they add up to ``context_window_tokens``."""
    window = budget.context_window_tokens
    free = budget.effective_input_tokens - budget.estimated_input_tokens
    parts = [
        ("system", "System Context", budget.system_context_tokens),
        ("conversation", "Conversation", budget.conversation_tokens),
        ("tools", "Tool Surface", budget.tool_surface_tokens),
        ("output", "Reserved output", budget.reserved_output_tokens),
        ("free", "Free space", max(free, 0)),
        ("reasoning", "Reasoning", capabilities.max_reasoning_tokens or 0),
        ("reserve", "Fixed reserve", capabilities.fixed_reserve_tokens),
        ("margin", "Safety margin", capabilities.safety_margin_tokens),
    ]
    line, used = budget.auto_compact_line, budget.auto_compact_used
    return WindowBar(
        window=window,
        segments=[
            Segment(key, label, tokens, _share(tokens, window)) for key, label, tokens in parts
        ],
        effective_input=budget.effective_input_tokens,
        line=line,
        line_share=_share(line, window),
        used=used,
        percent=auto_compact_percent(budget),
        reaches=budget.reaches_auto_compact_limit,
        over_by=max(-free, 0),
    )


def _origin(entry: Provenance, position: int) -> tuple[str, str]:
    """What to show of where the message comes from, and the row's key."""
    if entry["type"] == "persisted":
        sequence = entry["sequence"]
        where = entry["message_id"] + ("" if sequence is None else f" · seq {sequence}")
        return where, f"m:{entry['message_id']}"
    if entry["type"] == "synthesized":
        return entry["reason"].replace("_", " "), f"s:{entry['reason']}:{position}"
    return "supplied by the caller", f"p:{position}"


def rows_of(inspection: Inspection) -> list[RowView]:
    prepared = inspection.prepared
    provenance = prepared.provenance
    items: list[Item] = prepared.items
    sent = prepared.request["messages"][len(prepared.request["messages"]) - len(items) :]
    marks = message_marks(items, inspection.loaded, inspection.watermark)
    rows: list[RowView] = []
    for position, (item, message, entry, row_marks) in enumerate(
        zip(items, sent, provenance, marks, strict=True), start=1
    ):
        origin, key = _origin(entry, position)
        content = message["content"]
        rows.append(
            RowView(
                position=position,
                key=key,
                role=item.role,
                kind=item.kind,
                provenance=entry["type"],
                origin=origin,
                tokens=entry["tokens"],
                marks=row_marks,
                preview=preview(content),
                blocks=[block_view(b) for b in content],
                sent_json=compact_json(content),
            )
        )
    return rows


def _calibration(calibration: Calibration | None) -> CalibrationView | None:
    if calibration is None:
        return None
    return CalibrationView(
        counter=calibration.counter,
        ratio=calibration.ratio,
        sample_count=calibration.sample_count,
        min_ratio=calibration.min_ratio,
        max_ratio=calibration.max_ratio,
        stddev=calibration.stddev,
        applied=calibration.applied,
    )


def context_map(
    session: SessionView,
    inspection: Inspection,
    checkpoints: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    pins: PinsView,
) -> ContextMap:
    prepared = inspection.prepared
    turn_views = [turn_view(t) for t in turns]
    installed = checkpoints[0]["compaction_id"] if checkpoints else None  # newest first
    return ContextMap(
        session_id=session.id,
        title=session.title,
        model_id=session.model_id,
        counter=prepared.budget.counter,
        message_count=session.message_count,
        reload_required=session.reload_required,
        last_event_sequence=session.last_event_sequence,
        running=next((t for t in turn_views if t.status == "running"), None),
        origin=session.origin,
        forked_from=session.forked_from,
        bar=window_bar(prepared.budget, inspection.model.capabilities),
        rows=rows_of(inspection),
        conversation_tokens=prepared.budget.conversation_tokens,
        projection={k: v for k, v in asdict(prepared.projection).items() if v},
        checkpoints=[checkpoint_view(c, installed) for c in checkpoints],
        turns=turn_views,
        calibration=_calibration(inspection.calibration),
        pins=pins,
    )


def session_rows(sessions: Sequence[SessionView]) -> list[SessionRow]:
    heaviest = max((s.active_history_tokens for s in sessions), default=0)
    return [
        SessionRow(
            session_id=s.id,
            title=s.title,
            model_id=s.model_id,
            message_count=s.message_count,
            history_tokens=s.active_history_tokens,
            share=_share(s.active_history_tokens, heaviest),
            turns=s.usage.turns,
            input_tokens=s.usage.input_tokens,
            output_tokens=s.usage.output_tokens,
            created_at=timestamp(s.created_at),
            updated_at=timestamp(s.updated_at),
            reload_required=s.reload_required,
            origin=s.origin,
            forked_from=s.forked_from,
        )
        for s in sessions
    ]
