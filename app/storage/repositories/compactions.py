"""Compaction checkpoints (SPEC §7.6, §7.7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, bindparam, func, select

from app.storage.models import Compaction
from app.storage.repositories.base import Repository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["CompactionRepository"]

_compactions = cast(Table, Compaction.__table__)
_LATEST_ID = (
    select(_compactions.c.compaction_id)
    .where(_compactions.c.session_id == bindparam("k_session_id"))
    .order_by(_compactions.c.sequence.desc())
    .limit(1)
)


class CompactionRepository(Repository):
    async def add(self, row: Compaction) -> Compaction:
        """Store a checkpoint, giving it the next per-session ``sequence``.

        Locks the session row first so two concurrent compactions of one session cannot take the
        same sequence. The CHECK constraints refuse impossible rows (IntegrityError).
        """
        await SessionRepository(self.session).lock(row.session_id)
        last = await self.session.execute(
            select(func.max(Compaction.sequence)).where(Compaction.session_id == row.session_id)
        )
        row.sequence = int(last.scalar_one_or_none() or 0) + 1
        self.session.add(row)
        await self.session.flush()
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

    async def latest_id(self, session_id: str) -> str | None:
        """The ``compaction_id`` of ``latest`` (one column: no checkpoint row is decoded)."""
        value = (
            await self.session.execute(_LATEST_ID, {"k_session_id": session_id})
        ).scalar_one_or_none()
        return None if value is None else str(value)

    async def latest_installed_through(
        self, session_id: str, message_sequence: int
    ) -> Compaction | None:
        """Latest checkpoint whose install boundary is at or before ``message_sequence``
        (replay ``through_message:{n}``, SPEC §7.7)."""
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
