"""The checkpoint a summary makes (spec §7): its row, built before it is stored, and the check
that the summary request fits the summary model before it is sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from app.core.compaction import Checkpoint, compacted_projection, runtime_state_to_json
from app.core.counting import TokenCounter
from app.core.errors import TooLarge
from app.services.budget import TriggerEvidence
from app.services.compaction.records import new_compaction_id
from app.services.compaction.source import CompactionSource, conversation_tokens
from app.services.compaction.summary import GeneratedSummary
from app.storage.models import Compaction

__all__ = ["Trigger", "check_summary_fits", "checkpoint_row"]

Trigger = Literal["manual", "threshold", "overflow"]


def checkpoint_row(
    source: CompactionSource,
    generated: GeneratedSummary,
    counters: Callable[[str], TokenCounter],
    kind: Trigger,
    turn_id: str | None,
    evidence: TriggerEvidence | None,
    model_name: str,
) -> Compaction:
    """The checkpoint row of a summary of ``source`` (not stored yet), with the Conversation's
    tokens after it measured as the next request would measure them."""
    compaction_id = new_compaction_id()
    checkpoint = Checkpoint(
        compaction_id=compaction_id,
        sequence=0,
        kind=kind,
        summary=generated.summary,
        runtime_reminder=source.reminder,
        last_user=source.last_user,
        through_message_sequence=source.through,
        replaced_through_message_sequence=source.through,
    )
    after = conversation_tokens(
        source.session,
        source.model,
        counters(source.model.capabilities.token_counter),
        compacted_projection(checkpoint, []),
    )
    return Compaction(
        session_id=source.session.id,
        compaction_id=compaction_id,
        kind=kind,
        through_message_sequence=source.through,
        replaced_through_message_sequence=source.through,
        source_message_count=len(source.items),
        last_user_message_id=source.last_user.message_id,
        last_user_message_sequence=source.last_user.sequence,
        summary=generated.summary,
        summary_format_version=1,
        runtime_state=runtime_state_to_json(source.runtime_state),
        runtime_reminder=source.reminder,
        model=model_name,
        input_tokens=generated.usage.input_tokens,
        output_tokens=generated.usage.output_tokens,
        trigger_turn_id=turn_id,
        parent_compaction_id=None,
        trigger=None if evidence is None else dict(evidence),
        attempts=generated.attempts,
        prepare_ms=source.prepare_ms,
        summary_ms=generated.elapsed_ms,
        conversation_tokens_before=source.before.conversation_tokens,
        conversation_tokens_after=after.conversation_tokens,
    )


def check_summary_fits(source: CompactionSource) -> None:
    """Fail before the model call when the summary request cannot fit the summary model even
    with the conversation cut to its smallest view (``fit_summary_request``): what is left is
    the System Context and the checkpoint's own items."""
    budget = source.summary_request.budget
    if budget.estimated_input_tokens > budget.effective_input_tokens:
        raise TooLarge(
            "summary_input_overflow",
            f"the summary request needs {budget.estimated_input_tokens} input tokens even with "
            f"the conversation cut to fit, but the summary model {source.summary_model.id} "
            f"accepts {budget.effective_input_tokens}; the agent's system prompt leaves it no "
            "room: use a summary model with a larger window",
            attempts=0,
            estimated_input_tokens=budget.estimated_input_tokens,
            effective_input_tokens=budget.effective_input_tokens,
        )
