"""Agent messages (spec §6): queued durably, never start a turn, drained before a model call."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schemas.turns import AgentMessageBody
from app.core.content import Block, text_block
from app.core.counting import TokenCounter
from app.core.pipeline.item_caps import check_agent_message
from app.services.messages import exact_counts
from app.services.models import resolve_model
from app.services.turns.deps import TurnDeps
from app.storage.database import unit_of_work
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.state import MailboxRepository

__all__ = ["AgentMessageService", "QueuedMessage", "agent_message_text", "drain_mailbox"]


def agent_message_text(task: str, kind: str, body: str) -> str:
    """The envelope of spec §6 (agent messages); nothing is escaped."""
    return (
        f"<agent_message>\n<task>{task}</task>\n<kind>{kind}</kind>\n<body>\n{body}\n</body>\n"
        "</agent_message>"
    )


def _content(task: str, kind: str, body: str) -> list[Block]:
    return [text_block(agent_message_text(task, kind, body))]


async def drain_mailbox(
    db: AsyncSession,
    session_id: str,
    turn_id: str,
    counter: TokenCounter,
    *,
    pending: int | None = None,
) -> int:
    """Append every queued message as a user-role ``agent_message`` (oldest first) in ``db``'s
    transaction. The message id ``agent-msg:{id}`` makes a retried drain write nothing twice.

    ``pending`` is the session's ``mailbox_pending`` as read in this transaction (from the row
    loaded under its lock); ``0`` means the mailbox is empty, so it is not queried. ``None``
    always queries."""
    if pending == 0:
        return 0
    mailbox = MailboxRepository(db)
    messages = MessageRepository(db)
    delivered = 0
    for queued in await mailbox.pending(session_id):
        content = _content(queued.task, queued.kind, queued.body)
        message_id = f"agent-msg:{queued.agent_message_id}"
        stored = await messages.insert_if_absent(
            session_id,
            NewMessage(
                role="user",
                kind="agent_message",
                content=content,
                message_id=message_id,
                turn_id=turn_id,
                token_counts=exact_counts(counter, "user", content),
            ),
        )
        if stored is None:
            existing = await messages.get_by_message_id(session_id, message_id)
            assert existing is not None
            sequence = existing.sequence
        else:
            sequence = stored.sequence
        await mailbox.mark_delivered(session_id, queued.agent_message_id, sequence)
        delivered += 1
    return delivered


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """An agent message in the session's mailbox (``app/api/render/turns.py`` writes it)."""

    agent_message_id: str
    duplicate: bool  # this id was queued already: a retried delivery, not queued again
    tokens: int


class AgentMessageService:
    def __init__(self, deps: TurnDeps) -> None:
        self._deps = deps

    async def deliver(self, session_id: str, command: AgentMessageBody) -> QueuedMessage:
        """Check the envelope against the 4000-token cap and queue it (202). A repeated
        ``agent_message_id`` is a retried delivery: it is queued once."""
        task, kind, body = command.task, command.kind, command.body
        message_id = command.agent_message_id or f"am-{uuid.uuid4().hex}"
        async with unit_of_work(self._deps.db) as db:
            session = await SessionRepository(db).require(session_id)
            model = await resolve_model(db, session.model_id, session.tenant_id)
            counter = self._deps.counter(model.capabilities.token_counter)
            tokens = check_agent_message(task, _content(task, kind, body), counter)
            queued = await MailboxRepository(db).enqueue(
                session_id, agent_message_id=message_id, task=task, kind=kind, body=body
            )
        return QueuedMessage(message_id, duplicate=not queued, tokens=tokens)
