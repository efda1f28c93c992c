"""Turns and their plans (spec §6)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, JSONValue, utc_now

__all__ = ["TURN_STATUSES", "Turn"]

TURN_STATUSES = ("running", "completed", "failed", "cancelled", "interrupted")


class Turn(Base):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("session_id", "client_request_id"),
        CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')",
            name="status_valid",
        ),
        CheckConstraint("length(trim(client_request_id)) > 0", name="client_request_id_not_blank"),
        # A terminal turn has a finish time and a running one has none.
        CheckConstraint(
            "(status = 'running') = (finished_at IS NULL)", name="finished_iff_terminal"
        ),
        CheckConstraint("model_call_index >= 0", name="model_call_index_not_negative"),
        # One running turn per session, enforced by the database so it holds across replicas
        # (spec §6). A partial unique index works the same on SQLite and PostgreSQL.
        Index(
            "uq_turns_one_running_per_session",
            "session_id",
            unique=True,
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        # The sweeper looks for running turns whose runner's lease expired, and for waiting
        # turns whose caller missed the deadline for tool results.
        Index("ix_turns_status_lease_expires_at", "status", "lease_expires_at"),
        Index("ix_turns_status_tool_results_deadline", "status", "tool_results_deadline"),
        Index("ix_turns_session_id_created_at", "session_id", "created_at"),
    )

    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    turn_id: Mapped[str] = mapped_column(Text, primary_key=True)
    client_request_id: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="running")
    phase: Mapped[str] = mapped_column(String(64))
    # [{type: "text", text} | {type: "skill", name}] as accepted.
    input: Mapped[list[Any]] = mapped_column(JSONValue)
    # {code, message, final_text} once terminal.
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSONValue)
    model_call_index: Mapped[int] = mapped_column(Integer, default=0)
    pending_tool_calls: Mapped[list[Any]] = mapped_column(JSONValue, default=list)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSONValue)
    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    # When the turn last started waiting for the caller's tool results, the time by which all
    # of them must be posted (``app.services.turns.waiting``); meaningful only while waiting.
    tool_results_deadline: Mapped[datetime | None] = mapped_column()
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Input tokens the provider wrote to its prompt cache (part of ``input_tokens``).
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # W3C traceparent of the request that started the turn (traces on): its later legs, on any
    # replica, join that trace.
    trace_context: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column()
