"""Compaction checkpoints (spec §7.6, §7.7)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update

from app.storage.models import AgentSession, Compaction
from app.storage.repositories.base import Repository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["CompactionRepository"]


class CompactionRepository(Repository):
    async def add(self, row: Compaction) -> Compaction:
        """Store a checkpoint, giving it the next per-session ``sequence``, and record it as the
        session's ``latest_compaction_id`` (the highest sequence is the one just given).

        Locks the session row first so two concurrent compactions of one session cannot take the
        same sequence. The CHECK constraints refuse impossible rows (IntegrityError).
        """
        sessions = SessionRepository(self.session)
        await sessions.lock(row.session_id)
        last = await self.session.execute(
            select(func.max(Compaction.sequence)).where(Compaction.session_id == row.session_id)
        )
        row.sequence = int(last.scalar_one_or_none() or 0) + 1
        self.session.add(row)
        await self.session.flush()
        await sessions.set_latest_compaction_id(row.session_id, row.compaction_id)
        return row

    async def get(self, session_id: str, compaction_id: str) -> Compaction | None:
        return await self.session.get(Compaction, (session_id, compaction_id))

    async def latest(self, session_id: str) -> Compaction | None:
        """The checkpoint in force: the highest sequence."""
        stmt = (
            select(Compaction)
            .where(Compaction.session_id == session_id)
            .order_by(Compaction.sequence.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def latest_installed_through(
        self, session_id: str, message_sequence: int
    ) -> Compaction | None:
        """Latest checkpoint whose install boundary is at or before ``message_sequence``
        (replay ``through_message:{n}``, spec §7.7)."""
        stmt = (
            select(Compaction)
            .where(
                Compaction.session_id == session_id,
                Compaction.replaced_through_message_sequence <= message_sequence,
            )
            .order_by(Compaction.sequence.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def list_for_session(
        self, session_id: str, *, limit: int = 50, before_sequence: int | None = None
    ) -> Sequence[Compaction]:
        """Newest first; ``before_sequence`` pages further back."""
        stmt = select(Compaction).where(Compaction.session_id == session_id)
        if before_sequence is not None:
            stmt = stmt.where(Compaction.sequence < before_sequence)
        stmt = stmt.order_by(Compaction.sequence.desc()).limit(limit)
        return (await self.session.execute(stmt)).scalars().all()

    async def record_summary_request(
        self, session_id: str, *, through: int, compaction_id: str | None
    ) -> None:
        """Remember on the session the bring-your-own-model summary request just served: the
        last message it covers and the checkpoint it was built on. Bookkeeping, not a change of
        the session: ``updated_at`` keeps its value. Of two requests read at once, the one that
        saw more messages is the one remembered."""
        served = AgentSession.summary_request_through_sequence
        stmt = (
            update(AgentSession)
            .where(AgentSession.id == session_id, served.is_(None) | (served <= through))
            .values(
                {
                    served: through,
                    AgentSession.summary_request_compaction_id: compaction_id,
                    AgentSession.updated_at: AgentSession.updated_at,
                }
            )
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(stmt)
