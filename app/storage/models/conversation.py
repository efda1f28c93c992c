"""Conversation tables: append-only messages, their tool calls, and compaction checkpoints.

Every table here is session-scoped: it carries ``session_id`` and every primary key and unique
constraint includes it, so the schema can later be distributed by ``session_id`` (spec §5).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.naming import conv

from app.storage.base import Base, JSONValue, utc_now

__all__ = ["COMPACTION_KINDS", "Compaction", "Message", "ToolCall"]

COMPACTION_KINDS = ("manual", "threshold", "overflow", "rewind")


def _session_fk() -> ForeignKey:
    return ForeignKey("sessions.id", ondelete="CASCADE")


class Message(Base):
    """One stored message. Append-only: the repository offers no update and no delete."""

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("session_id", "message_id"),
        CheckConstraint("sequence > 0", name="sequence_positive"),
        CheckConstraint("role IN ('user', 'assistant', 'tool')", name="role_valid"),
        CheckConstraint(
            "kind IN ('normal', 'skill_instruction', 'agent_message', 'world_state')",
            name="kind_valid",
        ),
        # Contextual kinds are user-role messages (spec §1).
        CheckConstraint("kind = 'normal' OR role = 'user'", name="contextual_is_user"),
        # A tool row names its call; no other row does.
        CheckConstraint(
            "(role = 'tool') = (tool_call_id IS NOT NULL AND tool_name IS NOT NULL)",
            name="tool_identity",
        ),
        CheckConstraint("content_bytes >= 0", name="content_bytes_not_negative"),
    )

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    sequence: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    message_id: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(32))
    content: Mapped[list[Any]] = mapped_column(JSONValue)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    tool_name: Mapped[str | None] = mapped_column(Text)
    turn_id: Mapped[str | None] = mapped_column(Text)
    world_state_section: Mapped[str | None] = mapped_column(Text)
    # UTF-8 bytes of the compact content JSON without artifacts: the estimate's measure (spec §3.1),
    # cached at append time so a prepare never re-serializes unchanged history.
    content_bytes: Mapped[int] = mapped_column(Integer)
    # Exact counters' measures, keyed by counter name (spec §3.4).
    token_counts: Mapped[dict[str, int]] = mapped_column(JSONValue, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class ToolCall(Base):
    """One tool_call block of a stored assistant message, to check spec §5's rules with an index."""

    __tablename__ = "tool_calls"
    __table_args__ = (
        ForeignKeyConstraint(
            ["session_id", "message_sequence"],
            ["messages.session_id", "messages.sequence"],
            ondelete="CASCADE",
        ),
        # A duplicate unresolved call id is refused by the database too (spec §5).
        Index(
            "uq_tool_calls_unresolved_call_id",
            "session_id",
            "call_id",
            unique=True,
            sqlite_where=text("result_sequence IS NULL"),
            postgresql_where=text("result_sequence IS NULL"),
        ),
        CheckConstraint("call_index >= 0", name="call_index_not_negative"),
        CheckConstraint(
            "result_sequence IS NULL OR result_sequence > message_sequence",
            name="result_after_call",
        ),
    )

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    message_sequence: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    call_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    call_id: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    result_sequence: Mapped[int | None] = mapped_column(BigInteger)


class Compaction(Base):
    """A compaction checkpoint (spec §7.6). Impossible rows are refused by CHECK constraints."""

    __tablename__ = "conversation_compactions"
    __table_args__ = (
        UniqueConstraint("session_id", "sequence"),
        ForeignKeyConstraint(
            ["session_id", "parent_compaction_id"],
            ["conversation_compactions.session_id", "conversation_compactions.compaction_id"],
            ondelete="CASCADE",
            # Named by hand: the convention's name passes 63 characters, and PostgreSQL would
            # truncate it while SQLite would not, so the two schemas would disagree.
            name=conv("fk_conversation_compactions_parent"),
        ),
        # The trigger turn is a turn of the session (named by hand, as the parent link).
        ForeignKeyConstraint(
            ["session_id", "trigger_turn_id"],
            ["turns.session_id", "turns.turn_id"],
            name=conv("fk_conversation_compactions_trigger_turn"),
        ),
        CheckConstraint("sequence > 0", name="sequence_positive"),
        CheckConstraint("kind IN ('manual', 'threshold', 'overflow', 'rewind')", name="kind_valid"),
        CheckConstraint("summary_format_version = 1", name="summary_format_version_1"),
        CheckConstraint(
            "through_message_sequence >= 0 AND replaced_through_message_sequence >= 0",
            name="boundaries_not_negative",
        ),
        CheckConstraint(
            "replaced_through_message_sequence >= through_message_sequence",
            name="replaced_covers_through",
        ),
        CheckConstraint(
            "kind = 'rewind' OR replaced_through_message_sequence = through_message_sequence",
            name="only_rewind_hides_tail",
        ),
        # A threshold or overflow compaction names what crossed the line: the running turn, or
        # the session prepare (``POST .../prepare``) of a caller that runs its own model.
        CheckConstraint(
            "(kind IN ('threshold', 'overflow')) = "
            "(trigger_turn_id IS NOT NULL OR trigger_prepare_id IS NOT NULL)",
            name="trigger_iff_in_turn",
        ),
        CheckConstraint(
            "trigger_turn_id IS NULL OR trigger_prepare_id IS NULL", name="one_trigger"
        ),
        CheckConstraint(
            "(kind = 'rewind') = (parent_compaction_id IS NOT NULL)",
            name="parent_iff_rewind",
        ),
        CheckConstraint("length(summary) >= 500", name="summary_min_length"),
        CheckConstraint(
            "(last_user_message_id IS NULL) = (last_user_message_sequence IS NULL)",
            name="last_user_both_or_neither",
        ),
        CheckConstraint(
            "last_user_message_sequence IS NULL "
            "OR last_user_message_sequence <= through_message_sequence",
            name="last_user_within_facts",
        ),
        CheckConstraint("source_message_count >= 0", name="source_count_not_negative"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
    )

    session_id: Mapped[str] = mapped_column(Text, _session_fk(), primary_key=True)
    compaction_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sequence: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))
    through_message_sequence: Mapped[int] = mapped_column(BigInteger)
    replaced_through_message_sequence: Mapped[int] = mapped_column(BigInteger)
    source_message_count: Mapped[int] = mapped_column(Integer)
    last_user_message_id: Mapped[str | None] = mapped_column(Text)
    last_user_message_sequence: Mapped[int | None] = mapped_column(BigInteger)
    summary: Mapped[str] = mapped_column(Text)
    summary_format_version: Mapped[int] = mapped_column(Integer, default=1)
    runtime_state: Mapped[dict[str, Any]] = mapped_column(JSONValue)
    runtime_reminder: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    trigger_turn_id: Mapped[str | None] = mapped_column(Text)
    # The request id (``prepare-<uuid32>``) of the session prepare that compacted: it names the
    # World State messages that prepare wrote; no turn row has it.
    trigger_prepare_id: Mapped[str | None] = mapped_column(Text)
    parent_compaction_id: Mapped[str | None] = mapped_column(Text)
    # Why it fired: e.g. {estimated_input_tokens, reserved_output_tokens, trigger_line, error}.
    trigger: Mapped[dict[str, Any] | None] = mapped_column(JSONValue)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    prepare_ms: Mapped[int | None] = mapped_column(Integer)
    summary_ms: Mapped[int | None] = mapped_column(Integer)
    persistence_ms: Mapped[int | None] = mapped_column(Integer)
    install_ms: Mapped[int | None] = mapped_column(Integer)
    conversation_tokens_before: Mapped[int | None] = mapped_column(Integer)
    conversation_tokens_after: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
