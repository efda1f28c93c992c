"""Rewind (spec §7.7): a new ``rewind`` checkpoint that reinstalls an earlier
one. It copies the target's summary, replay anchor and fact boundary; its install boundary is the
session's current last message, which hides the abandoned tail. No model call, no message
deleted, no tool replayed, no file reverted: only a checkpoint row is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.core.compaction import (
    compacted_projection,
    rewind_checkpoint,
    runtime_state_to_json,
    unknown_compaction_id,
    validate_summary,
)
from app.core.counting import TokenCounter
from app.services.compaction.persist import store_checkpoint
from app.services.compaction.records import new_compaction_id
from app.services.compaction.source import conversation_tokens, require_idle, runtime_state_for
from app.services.conversation import load_active, load_checkpoint
from app.services.events import EventPublisher
from app.services.models import resolve_model
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Compaction
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["store_rewind"]


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


async def store_rewind(
    factory: SessionFactory,
    events: EventPublisher,
    counters: Callable[[str], TokenCounter],
    session_id: str,
    compaction_id: str,
) -> Compaction:
    """Store a ``rewind`` checkpoint that reinstalls ``compaction_id`` (one transaction)."""
    started = time.perf_counter()
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(session_id, for_update=True)
        await require_idle(db, session_id, "rewound")
        target_row = await CompactionRepository(db).get(session_id, compaction_id)
        if target_row is None:
            raise unknown_compaction_id(compaction_id, "compaction_id")
        target = await load_checkpoint(db, target_row)
        # A stored summary is re-validated before it is installed again (spec §7.7).
        validate_summary(target.summary, finish_reason="stop", has_tool_calls=False)
        model = await resolve_model(db, session.model_id, session.tenant_id)
        counter = counters(model.capabilities.token_counter)
        active = await load_active(db, session, counter.name)
        before = conversation_tokens(session, model, counter, active.items)
        current_max = await MessageRepository(db).last_sequence(session_id) or 0
        state, reminder = await runtime_state_for(
            db, session_id, turn_id=None, counter=counter.name
        )
        checkpoint = rewind_checkpoint(
            target,
            compaction_id=new_compaction_id(),
            sequence=0,
            current_max_sequence=current_max,
            runtime_reminder=reminder,
        )
        after = conversation_tokens(session, model, counter, compacted_projection(checkpoint, []))
        prepare_ms = _ms(started)
        row = Compaction(
            session_id=session_id,
            compaction_id=checkpoint.compaction_id,
            kind="rewind",
            through_message_sequence=checkpoint.through_message_sequence,
            replaced_through_message_sequence=checkpoint.replaced_through_message_sequence,
            source_message_count=target_row.source_message_count,
            last_user_message_id=target_row.last_user_message_id,
            last_user_message_sequence=target_row.last_user_message_sequence,
            summary=target_row.summary,
            summary_format_version=1,
            runtime_state=runtime_state_to_json(state),
            runtime_reminder=reminder,
            model=target_row.model,
            input_tokens=target_row.input_tokens,
            output_tokens=target_row.output_tokens,
            trigger_turn_id=None,
            parent_compaction_id=target_row.compaction_id,
            trigger=None,
            attempts=0,  # no model call
            prepare_ms=prepare_ms,
            summary_ms=0,
            conversation_tokens_before=before.conversation_tokens,
            conversation_tokens_after=after.conversation_tokens,
        )
        persist_started = time.perf_counter()
        stored = await store_checkpoint(db, events, row, base_compaction_id=None)
    stored.persistence_ms = _ms(persist_started)
    return stored
