"""Per-session state that must survive restarts and be shared by replicas: World State
baselines, the agent-message mailbox, the live-update log and the previous request's prefix
record."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, JSONValue, utc_now

__all__ = [
    "AgentMessage",
    "ScriptPosition",
    "SessionEvent",
    "SessionRequestPrefix",
    "WorldStateBaseline",
]


def _session_fk() -> ForeignKey:
    return ForeignKey("sessions.id", ondelete="CASCADE")


class WorldStateBaseline(Base):
    """The last body sent for one World State section (spec §4); no row = no baseline."""

    __tablename__ = "world_state_baselines"

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    section_id: Mapped[str] = mapped_column(Text, primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)


class ScriptPosition(Base):
    """How many entries of a ``scripted`` model's script one session has taken (API notes,
    Models): each session replays the script from its first entry, whoever else uses the model.
    No row: none taken. ``PUT`` of the model deletes its rows (the script starts again)."""

    __tablename__ = "script_positions"
    __table_args__ = (CheckConstraint("taken > 0", name="taken_positive"),)

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    model_id: Mapped[str] = mapped_column(Text, primary_key=True)
    taken: Mapped[int] = mapped_column(BigInteger)


class AgentMessage(Base):
    """A queued agent message (spec §6), delivered into the conversation before a model call.

    ``sequence`` orders a session's mailbox: allocated by the database when the message is
    queued (``MailboxRepository.enqueue``, under the session's lock), never taken from a clock,
    so replicas whose clocks disagree still deliver in the order the messages were queued."""

    __tablename__ = "agent_messages"
    __table_args__ = (
        CheckConstraint("kind IN ('final_answer', 'interrupted', 'failed')", name="kind_valid"),
        CheckConstraint("sequence > 0", name="sequence_positive"),
        # Also the index the drain reads the queue in order with.
        UniqueConstraint("session_id", "sequence"),
    )

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    agent_message_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sequence: Mapped[int] = mapped_column(BigInteger)
    task: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    # The sequence of the conversation message it became; NULL while still queued.
    delivered_message_sequence: Mapped[int | None] = mapped_column(BigInteger)


class SessionEvent(Base):
    """One live update (spec §6) with a per-session increasing sequence, for SSE replay."""

    __tablename__ = "session_events"
    __table_args__ = (CheckConstraint("sequence > 0", name="sequence_positive"),)

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    sequence: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    turn_id: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONValue)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class SessionRequestPrefix(Base):
    """The prefix record (``app.core.caching.prefix_record``) of the session's previous prepared
    request: what
    the next one's ``stable_prefix_tokens`` is measured against, on every replica. No row: no
    previous request (a row that does not decode counts the same)."""

    __tablename__ = "session_request_prefixes"

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    record: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)
