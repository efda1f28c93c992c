"""Small typed records for the append-only, hot-path rows (messages, tool calls, events).

These tables are read in bulk (a whole conversation before every model call), so they are loaded
as plain column tuples into slotted dataclasses rather than ORM objects: no identity map, no
change tracking, no per-row instrumentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core.content import Block, CachedMeasure, Item, Kind, RealOrigin, Role

__all__ = [
    "EventRecord",
    "MessagePage",
    "NewEvent",
    "NewMessage",
    "StoredMessage",
    "ToolCallRecord",
]

ESTIMATE_COUNTER = "estimate"


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append. ``message_id`` defaults to a fresh ``msg-<uuid32>``; give one to make
    a retry idempotent (``MessageRepository.insert_if_absent``). ``token_counts`` carries the
    measures of exact counters computed by the caller (spec §3.4); the estimate's measure is
    computed by the repository."""

    role: Role
    kind: Kind
    content: list[Block]
    message_id: str | None = None
    turn_id: str | None = None
    world_state_section: str | None = None
    token_counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    session_id: str
    sequence: int
    message_id: str
    role: Role
    kind: Kind
    content: list[Block]
    tool_call_id: str | None
    tool_name: str | None
    turn_id: str | None
    world_state_section: str | None
    # UTF-8 bytes of the compact content JSON without artifacts (the estimate's measure).
    content_bytes: int
    token_counts: dict[str, int]
    created_at: datetime

    def cached_measure(self, counter: str = ESTIMATE_COUNTER) -> CachedMeasure | None:
        """The figure stored for ``counter``, or ``None`` when it was never computed."""
        if counter == ESTIMATE_COUNTER:
            return CachedMeasure(counter, self.content_bytes)
        measure = self.token_counts.get(counter)
        return None if measure is None else CachedMeasure(counter, measure)

    def to_item(self, counter: str = ESTIMATE_COUNTER) -> Item:
        """The Conversation item of this row, with its cached measure for ``counter``."""
        return Item(
            role=self.role,
            kind=self.kind,
            content=self.content,
            origin=RealOrigin(message_id=self.message_id, sequence=self.sequence),
            cached=self.cached_measure(counter),
        )


@dataclass(frozen=True, slots=True)
class MessagePage:
    messages: list[StoredMessage]
    has_more: bool

    @property
    def next_after_sequence(self) -> int | None:
        """Pass as ``after_sequence`` for the next page; ``None`` when there is none."""
        return self.messages[-1].sequence if self.has_more and self.messages else None


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    session_id: str
    call_id: str
    name: str
    message_sequence: int
    call_index: int
    result_sequence: int | None


@dataclass(frozen=True, slots=True)
class NewEvent:
    type: str
    payload: dict[str, Any]
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    session_id: str
    sequence: int
    type: str
    turn_id: str | None
    payload: dict[str, Any]
    created_at: datetime
