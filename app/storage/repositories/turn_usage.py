"""The token usage of a session's turns, summed (``GET /v1/sessions``: each session's ``usage``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.models import Turn

__all__ = ["NO_USAGE", "TurnUsage", "usage_by_session"]


@dataclass(frozen=True, slots=True)
class TurnUsage:
    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cache_creation_tokens: int


NO_USAGE = TurnUsage(0, 0, 0, 0, 0, 0)


async def usage_by_session(db: AsyncSession, session_ids: Sequence[str]) -> dict[str, TurnUsage]:
    """Σ of the token usage of every turn of each session (sessions without turns absent)."""
    if not session_ids:
        return {}
    stmt = (
        select(
            Turn.session_id,
            func.count(),
            func.sum(Turn.input_tokens),
            func.sum(Turn.output_tokens),
            func.sum(Turn.cached_tokens),
            func.sum(Turn.reasoning_tokens),
            func.sum(Turn.cache_creation_tokens),
        )
        .where(Turn.session_id.in_(session_ids))
        .group_by(Turn.session_id)
    )
    rows = (await db.execute(stmt)).all()
    return {row[0]: TurnUsage(*(int(v) for v in row[1:])) for row in rows}
