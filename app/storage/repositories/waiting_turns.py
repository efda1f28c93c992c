"""Turns waiting for the caller's tool results, and their deadline (spec §6, §16.3)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from app.storage.models import Turn
from app.storage.repositories.base import Repository

__all__ = ["WaitingTurnRepository"]

WAITING = "waiting_tool_results"


class WaitingTurnRepository(Repository):
    async def set_deadline(self, session_id: str, turn_id: str, deadline: datetime) -> None:
        """Give a turn that is about to wait its deadline for tool results (a Core UPDATE: a
        ``Turn`` already loaded in this session is not refreshed)."""
        stmt = (
            update(Turn)
            .where(Turn.session_id == session_id, Turn.turn_id == turn_id)
            .values(tool_results_deadline=deadline)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(stmt)

    async def overdue(self, *, now: datetime, limit: int = 100) -> list[tuple[str, str]]:
        """``(session_id, turn_id)`` of running turns that wait for tool results and whose
        deadline is ``now`` or earlier. A candidate list: each is re-checked under its
        session's lock when ended."""
        stmt = (
            select(Turn.session_id, Turn.turn_id)
            .where(
                Turn.status == "running",
                Turn.tool_results_deadline <= now,
                Turn.phase == WAITING,
            )
            .order_by(Turn.tool_results_deadline)
            .limit(limit)
        )
        return [(row[0], row[1]) for row in (await self.session.execute(stmt)).all()]
