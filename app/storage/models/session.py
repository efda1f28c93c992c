"""The ``sessions`` table: one agent conversation and its counters.

The two ``last_*_sequence`` columns are allocators: a writer bumps them with one
``UPDATE … RETURNING`` inside its transaction, which both hands out gap-free per-session sequences
and (on PostgreSQL) row-locks the session so writers of one session queue up instead of colliding.

More columns summarize other tables, kept up to date by the repository that writes those tables
in the same transaction, so a turn step that has just loaded the session row (locked) can skip
the reads that almost never find anything new: ``mailbox_pending`` (queued agent messages),
``latest_compaction_id`` (the checkpoint in force), ``world_state_version`` (a token naming the
stored World State baselines) and ``pin_count`` (the session's pins).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, CheckConstraint, Index, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, JSONValue, utc_now

__all__ = ["UNKNOWN_WORLD_STATE_VERSION", "AgentSession", "new_world_state_version"]

# ``world_state_version`` of a row inserted without the ORM (the column's server default, also
# what the migration adds the column with): no token yet, so nothing may be cached under it.
UNKNOWN_WORLD_STATE_VERSION = "unknown"


def new_world_state_version() -> str:
    """A fresh token for ``world_state_version``: random, so it never names two baseline sets."""
    return uuid.uuid4().hex


class AgentSession(Base):
    __tablename__ = "sessions"
    __table_args__ = (
        CheckConstraint("length(trim(id)) > 0", name="id_not_blank"),
        CheckConstraint(
            "tool_result_pruned_through_sequence IS NULL "
            "OR tool_result_pruned_through_sequence > 0",
            name="pruned_through_positive",
        ),
        CheckConstraint("last_message_sequence >= 0", name="last_message_sequence_valid"),
        CheckConstraint("last_event_sequence >= 0", name="last_event_sequence_valid"),
        # Listing is newest first with a (created_at, id) cursor.
        Index("ix_sessions_created_at_id", "created_at", "id"),
        # A tenant lists its own sessions (``docs/security.md``).
        Index("ix_sessions_tenant_id_created_at_id", "tenant_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    # The tenant of the key that made the session (``app.core.tenancy``); never changes.
    tenant_id: Mapped[str] = mapped_column(Text, default="default", server_default="default")
    title: Mapped[str | None] = mapped_column(Text)
    # Free text, no foreign key: built-in catalogue models have no row in ``models``.
    model_id: Mapped[str] = mapped_column(Text)
    summary_model_id: Mapped[str] = mapped_column(Text)
    # {system_prompt, tools, max_model_calls, doom_loop_threshold}
    agent: Mapped[dict[str, Any]] = mapped_column(JSONValue)
    workspace: Mapped[dict[str, Any] | None] = mapped_column(JSONValue)
    # {mode, available}
    sandbox: Mapped[dict[str, Any]] = mapped_column(JSONValue)
    disabled_skills: Mapped[list[str]] = mapped_column(JSONValue, default=list)
    # spec §5: only ever increases (SessionRepository.advance_pruning_watermark); NULL = none.
    tool_result_pruned_through_sequence: Mapped[int | None] = mapped_column(BigInteger)
    last_message_sequence: Mapped[int] = mapped_column(BigInteger, default=0)
    last_event_sequence: Mapped[int] = mapped_column(BigInteger, default=0)
    # spec §7.6: a checkpoint was stored but not installed; new turns are refused until rebuilt.
    reload_required: Mapped[bool] = mapped_column(Boolean, default=False)
    # Undelivered rows of ``agent_messages`` (MailboxRepository.enqueue / mark_delivered).
    mailbox_pending: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Rows of ``session_pins`` (PinRepository keeps it with every change): 0 = nothing to render.
    pin_count: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Rows of ``tool_calls`` without a result (MessageRepository keeps it with every append).
    open_tool_calls: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # ``compaction_id`` of the highest-sequence checkpoint (CompactionRepository.add); NULL = none.
    latest_compaction_id: Mapped[str | None] = mapped_column(Text)
    # Replaced by a fresh random token whenever the stored baselines change
    # (BaselineRepository.apply): a process may cache the baselines under it (WorldStateSampler).
    world_state_version: Mapped[str] = mapped_column(
        Text, default=new_world_state_version, server_default=UNKNOWN_WORLD_STATE_VERSION
    )
    # The last bring-your-own-model summary request served (``GET .../compactions/request``):
    # the last message it covers and the checkpoint it was built on (NULL: none). A summary
    # posted without saying what it covers is installed only if it can be this request's.
    summary_request_through_sequence: Mapped[int | None] = mapped_column(BigInteger)
    summary_request_compaction_id: Mapped[str | None] = mapped_column(Text)
    # Messages taken back and the latest epoch (``app.core.conversation_view``); NULL: none.
    conversation_view: Mapped[dict[str, Any] | None] = mapped_column(JSONValue)
    # Who made the session: NULL for the sessions API, ``proxy:<protocol>`` for a compatible
    # endpoint (spec §21); and the session a proxied history was forked from (no foreign key:
    # the origin may be deleted, the fork stays).
    origin: Mapped[str | None] = mapped_column(Text)
    forked_from: Mapped[str | None] = mapped_column(Text)
    # The compatible endpoints' calls into this session (spec §21) and the usage their providers
    # reported, summed: a proxied call has no turn to hold it (``usage`` adds them to the
    # turns'). Kept by the write that stores the call's answer (``SessionRepository.add_usage``).
    proxied_calls: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    proxied_input_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    proxied_output_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    proxied_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    proxied_cache_creation_tokens: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default="0"
    )
    proxied_reasoning_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)
