"""A session's pins and the pins the service proposes from its user messages (``app.core.pins``).

Session-scoped like every table but ``models``: ``session_id`` leads every key, so the tables
distribute by session with the rest (spec §5).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, utc_now

__all__ = ["PinProposal", "SessionPin"]


def _session_fk() -> ForeignKey:
    return ForeignKey("sessions.id", ondelete="CASCADE")


class SessionPin(Base):
    """One pin in force. ``position`` orders a session's pins (a replaced pin keeps its own);
    the session's ``pin_count`` counts the rows (``PinRepository``)."""

    __tablename__ = "session_pins"
    __table_args__ = (
        CheckConstraint("kind IN ('constraint', 'decision', 'fact')", name="kind_valid"),
        CheckConstraint("position > 0", name="position_positive"),
        UniqueConstraint("session_id", "position"),
    )

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    pin_id: Mapped[str] = mapped_column(Text, primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    # The proposal it was accepted from; NULL: pinned by the caller directly.
    proposal_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)


class PinProposal(Base):
    """A sentence of a user message the service recognized as a constraint, proposed as a pin
    until the caller accepts or dismisses it. One row per distinct text and session
    (``text_key``): a sentence once answered is never proposed again."""

    __tablename__ = "pin_proposals"
    __table_args__ = (
        CheckConstraint("status IN ('open', 'accepted', 'dismissed')", name="status_valid"),
        UniqueConstraint("session_id", "text_key"),
    )

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    proposal_id: Mapped[str] = mapped_column(Text, primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    # SHA-256 of the text, hex: the key of "the same sentence" (texts may be long).
    text_key: Mapped[str] = mapped_column(String(64))
    # The user message it was found in.
    message_id: Mapped[str] = mapped_column(Text)
    message_sequence: Mapped[int] = mapped_column(BigInteger)
    # Its place among the proposals of that message (0 = found first).
    ordinal: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="open")
    # The pin an accepted proposal became (it may since have been removed).
    pin_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    decided_at: Mapped[datetime | None] = mapped_column()
