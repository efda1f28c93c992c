"""The active Conversation of a stored session and the regions of its next request (spec §5).

Loaded the same way by context inspection, session prepare, turns and compaction, so what a
client inspects is exactly what a model call would get (acceptance: inspection = real request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction.checkpoint import Checkpoint, LastUserRequest, compacted_projection
from app.core.compaction.transcript import CONVERSATION_HISTORY_TOOL
from app.core.content import Item, text_block
from app.core.conversation_view import EMPTY_VIEW, ConversationView
from app.core.errors import InvalidInput
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart, ToolDefinition
from app.core.turn_plan import UPDATE_PLAN_TOOL
from app.services.session_config import (
    agent_profile_of,
    conversation_view_of,
    spill_directory_of,
    system_prompt_of,
    tools_of,
)
from app.storage.models import AgentSession, Compaction
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import StoredMessage

__all__ = [
    "AGENT_SYSTEM_KEY",
    "SERVER_TOOLS",
    "ActiveConversation",
    "checkpoint_of",
    "load_active",
    "system_context_of",
    "tool_surface_of",
    "watermark_of",
]

AGENT_SYSTEM_KEY = "core/agent-system"
# Tools the service executes itself (spec §6); advertised after the agent's own tools, those
# the agent chose (``app.core.agent_profile``). Their names stay reserved whether chosen or not.
SERVER_TOOLS: tuple[ToolDefinition, ...] = (UPDATE_PLAN_TOOL, CONVERSATION_HISTORY_TOOL)
SERVER_TOOL_NAMES = frozenset(t["name"] for t in SERVER_TOOLS)


@dataclass(frozen=True, slots=True)
class ActiveConversation:
    items: list[Item]
    # The checkpoint that projects into the Conversation (none before one, or after a new
    # epoch until the next one).
    checkpoint: Checkpoint | None
    # Stored messages the projection shows (the tail after the install boundary, or all, less
    # those the view hides).
    stored: list[StoredMessage]
    # What the read was made on: the session's latest checkpoint (projected or not) and view.
    latest_compaction_id: str | None = None
    view: ConversationView = EMPTY_VIEW


def system_context_of(session: AgentSession) -> list[SystemPart]:
    """System Context is only the agent's system prompt (spec §0)."""
    return [SystemPart(AGENT_SYSTEM_KEY, [text_block(system_prompt_of(session))])]


def tool_surface_of(session: AgentSession) -> list[ToolDefinition]:
    """The agent's tools in their given order, then the control tools it chose: deterministic.
    A control tool not advertised is not run either: a call of it is a call of an unknown tool
    (the runner checks calls against this surface)."""
    tools: list[ToolDefinition] = [
        {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
        for t in tools_of(session)
    ]
    chosen = agent_profile_of(session).control_tools
    return [*tools, *(t for t in SERVER_TOOLS if t["name"] in chosen)]


def watermark_of(session: AgentSession) -> PruningWatermark:
    return PruningWatermark(
        session.tool_result_pruned_through_sequence, spill_directory_of(session)
    )


def _checked(rows: list[StoredMessage]) -> list[StoredMessage]:
    # The schema forbids it; this guards hand-edited databases (spec §1).
    for row in rows:
        if row.role not in ("user", "assistant", "tool"):
            raise InvalidInput(
                "system_message_in_conversation",
                f"stored message {row.message_id} has role {row.role!r}; a Conversation never "
                "holds system messages",
            )
    return rows


def checkpoint_of(row: Compaction, last_user: StoredMessage | None) -> Checkpoint:
    content: list[Any] = list(last_user.content) if last_user is not None else []
    return Checkpoint(
        compaction_id=row.compaction_id,
        sequence=row.sequence,
        kind=row.kind,  # type: ignore[arg-type]
        summary=row.summary,
        runtime_reminder=row.runtime_reminder,
        last_user=LastUserRequest(
            row.last_user_message_id, row.last_user_message_sequence, content
        ),
        through_message_sequence=row.through_message_sequence,
        replaced_through_message_sequence=row.replaced_through_message_sequence,
        parent_compaction_id=row.parent_compaction_id,
        trigger_turn_id=row.trigger_turn_id,
    )


async def load_checkpoint(db: AsyncSession, row: Compaction) -> Checkpoint:
    last_user = None
    if row.last_user_message_sequence is not None:
        last_user = await MessageRepository(db).get_by_sequence(
            row.session_id, row.last_user_message_sequence
        )
    return checkpoint_of(row, last_user)


async def load_active(
    db: AsyncSession,
    session: AgentSession,
    counter: str = "estimate",
    *,
    through: int | None = None,
) -> ActiveConversation:
    """All messages in order, or after a compaction: its three items + the messages after it;
    with ``through``, only the stored messages up to that sequence (what a summary request
    served back then covered). Messages and checkpoints the session's view hides are left out
    (``app.core.conversation_view``)."""
    messages = MessageRepository(db)
    view = conversation_view_of(session)
    latest_id = session.latest_compaction_id
    # The session row names its latest checkpoint: a session never compacted needs no lookup.
    latest = None
    if latest_id is not None:
        latest = await CompactionRepository(db).latest(session.id)
    if latest is not None and not view.shows_checkpoint(latest.sequence):
        latest = None
    after = max(view.epoch_after, latest.replaced_through_message_sequence if latest else 0)
    rows = view.visible(
        _checked(await messages.load(session.id, after_sequence=after, through_sequence=through))
    )
    tail = [r.to_item(counter) for r in rows]
    if latest is None:
        return ActiveConversation(tail, None, rows, latest_id, view)
    checkpoint = await load_checkpoint(db, latest)
    return ActiveConversation(
        compacted_projection(checkpoint, tail), checkpoint, rows, latest_id, view
    )
