"""World State baselines, the agent-message mailbox and the live-update log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from sqlalchemy import Table, func, insert, select, update

from app.storage.base import utc_now
from app.storage.deferred import write
from app.storage.models import AgentMessage, SessionEvent, WorldStateBaseline
from app.storage.repositories.base import Repository
from app.storage.repositories.records import EventRecord, NewEvent
from app.storage.repositories.sessions import SessionRepository

__all__ = ["BaselineRepository", "EventRepository", "MailboxRepository"]

# How "the removal notice was sent" is stored (see BaselineRepository).
_KNOWN_ABSENT = ""


class BaselineRepository(Repository):
    """The last body sent per World State section (spec §4), shared by all replicas.

    Three states per section, as ``app.core.world_state.diff`` expects them: no row = no
    baseline (never sent, or the record was lost); a body = that body was sent; ``None`` = the
    removal notice was sent (known absent). Known absent is stored as an empty body: a rendered
    section is never empty (it always carries its tags), so the value cannot be mistaken for one,
    and the schema stays as it is.

    Every change renews the session's ``world_state_version`` in the same transaction: processes
    cache the baselines under that token (``WorldStateSampler``), so anything else that writes
    ``world_state_baselines`` must renew it too.
    """

    async def get_all(self, session_id: str) -> dict[str, str | None]:
        stmt = select(WorldStateBaseline.section_id, WorldStateBaseline.body).where(
            WorldStateBaseline.session_id == session_id
        )
        rows = (await self.session.execute(stmt)).all()
        return {section: (body or None) for section, body in rows}

    async def apply(self, session_id: str, changes: Mapping[str, str | None]) -> str:
        """Set each section's baseline to its body, or to "known absent" for ``None``, and give
        the session a new ``world_state_version``; returns it (the token naming the baselines
        as they now are in this transaction).

        Call it only after every World State message of the sample was written (spec §4)."""
        now = utc_now()
        for section_id, body in changes.items():
            stmt = self._insert(WorldStateBaseline).values(
                session_id=session_id,
                section_id=section_id,
                body=_KNOWN_ABSENT if body is None else body,
                updated_at=now,
            )
            stmt = stmt.on_conflict_do_update(
                index_elements=[WorldStateBaseline.session_id, WorldStateBaseline.section_id],
                set_={"body": stmt.excluded.body, "updated_at": now},
            )
            await self.session.execute(stmt)
        return await SessionRepository(self.session).renew_world_state_version(session_id)


class MailboxRepository(Repository):
    """Agent messages queued durably until the next model call drains them (spec §6)."""

    async def enqueue(
        self, session_id: str, *, agent_message_id: str, task: str, kind: str, body: str
    ) -> bool:
        """Queue a message; ``False`` when this id was already queued (a retried delivery).

        Its ``sequence`` is the session's next one, allocated by the INSERT itself under the
        session's lock (enqueues of one session queue up on it, on every replica). A queued
        message counts in the session's ``mailbox_pending`` (same transaction)."""
        sessions = SessionRepository(self.session)
        await sessions.lock(session_id)
        stmt = (
            self._insert(AgentMessage)
            .values(
                session_id=session_id,
                agent_message_id=agent_message_id,
                # The session's next mailbox sequence, read by the INSERT that takes it.
                sequence=select(func.coalesce(func.max(AgentMessage.sequence), 0) + 1)
                .where(AgentMessage.session_id == session_id)
                .scalar_subquery(),
                task=task,
                kind=kind,
                body=body,
                created_at=utc_now(),
            )
            .on_conflict_do_nothing(
                index_elements=[AgentMessage.session_id, AgentMessage.agent_message_id]
            )
            .returning(AgentMessage.agent_message_id)
        )
        if (await self.session.execute(stmt)).first() is None:
            return False
        await sessions.add_mailbox_pending(session_id, 1)
        return True

    async def pending(self, session_id: str) -> Sequence[AgentMessage]:
        """Undelivered messages in the order they were queued (``sequence``)."""
        stmt = (
            select(AgentMessage)
            .where(
                AgentMessage.session_id == session_id,
                AgentMessage.delivered_message_sequence.is_(None),
            )
            .order_by(AgentMessage.sequence)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def mark_delivered(
        self, session_id: str, agent_message_id: str, message_sequence: int
    ) -> bool:
        """Record the conversation message it became; ``False`` if already delivered.

        A message delivered here no longer counts in the session's ``mailbox_pending``."""
        stmt = (
            update(AgentMessage)
            .where(
                AgentMessage.session_id == session_id,
                AgentMessage.agent_message_id == agent_message_id,
                AgentMessage.delivered_message_sequence.is_(None),
            )
            .values(delivered_message_sequence=message_sequence)
            .returning(AgentMessage)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        if (await self.session.execute(stmt)).scalar_one_or_none() is None:
            return False
        await SessionRepository(self.session).add_mailbox_pending(session_id, -1)
        return True


_events = cast(Table, SessionEvent.__table__)
_INSERT_EVENTS = insert(_events)  # built once (see messages._INSERT_MESSAGES)


class EventRepository(Repository):
    """Live updates with a per-session increasing sequence, replayable from any sequence."""

    async def append(
        self, session_id: str, type: str, payload: dict[str, object], *, turn_id: str | None = None
    ) -> EventRecord:
        (record,) = await self.append_many(session_id, [NewEvent(type, dict(payload), turn_id)])
        return record

    async def append_many(self, session_id: str, events: Sequence[NewEvent]) -> list[EventRecord]:
        if not events:
            return []
        last = await SessionRepository(self.session).allocate_event_sequences(
            session_id, len(events)
        )
        now = utc_now()
        first = last - len(events) + 1
        records = [
            EventRecord(session_id, first + i, e.type, e.turn_id, e.payload, now)
            for i, e in enumerate(events)
        ]
        await write(
            self.session,
            _INSERT_EVENTS,
            [
                {
                    "session_id": r.session_id,
                    "sequence": r.sequence,
                    "type": r.type,
                    "turn_id": r.turn_id,
                    "payload": r.payload,
                    "created_at": r.created_at,
                }
                for r in records
            ],
        )
        return records

    async def list_after(
        self,
        session_id: str,
        after_sequence: int = 0,
        *,
        limit: int = 500,
        through_sequence: int | None = None,
    ) -> list[EventRecord]:
        stmt = (
            select(
                _events.c.session_id,
                _events.c.sequence,
                _events.c.type,
                _events.c.turn_id,
                _events.c.payload,
                _events.c.created_at,
            )
            .where(_events.c.session_id == session_id, _events.c.sequence > after_sequence)
            .order_by(_events.c.sequence)
            .limit(limit)
        )
        if through_sequence is not None:
            stmt = stmt.where(_events.c.sequence <= through_sequence)
        connection = await self.session.connection()
        return [EventRecord(*row) for row in await connection.execute(stmt)]
