"""The token usage of a session: its turns' columns summed (``GET /v1/sessions``: each session's
``usage``), plus the proxied calls (spec §21) the session's own ``proxied_*`` columns count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.models import AgentSession, Turn

__all__ = [
    "NO_USAGE",
    "PROXIED_COLUMNS",
    "TurnUsage",
    "proxied_increments",
    "usage_by_session",
    "with_proxied",
]

# The figures a provider reports, as a turn's columns and ``usage_columns`` name them.
_FIGURES: Final = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
)
# The session's columns that count its proxied calls and sum their figures.
PROXIED_COLUMNS: Final = ("proxied_calls", *(f"proxied_{name}" for name in _FIGURES))


@dataclass(frozen=True, slots=True)
class TurnUsage:
    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cache_creation_tokens: int
    # Calls of the compatible endpoints: no turn holds them, their figures are in the sums.
    proxied_calls: int = 0


NO_USAGE = TurnUsage(0, 0, 0, 0, 0, 0)


def proxied_increments(usage: Mapping[str, int]) -> dict[str, int]:
    """What one proxied call adds to the session's ``PROXIED_COLUMNS`` (absent figures: 0)."""
    return {"proxied_calls": 1} | {f"proxied_{name}": usage.get(name, 0) for name in _FIGURES}


def with_proxied(usage: TurnUsage, row: AgentSession) -> TurnUsage:
    """``usage`` (the session's turns) with its proxied calls added: one figure per provider
    report, whichever path made the call."""
    if not row.proxied_calls:
        return usage
    return TurnUsage(
        turns=usage.turns,
        input_tokens=usage.input_tokens + row.proxied_input_tokens,
        output_tokens=usage.output_tokens + row.proxied_output_tokens,
        cached_tokens=usage.cached_tokens + row.proxied_cached_tokens,
        reasoning_tokens=usage.reasoning_tokens + row.proxied_reasoning_tokens,
        cache_creation_tokens=usage.cache_creation_tokens + row.proxied_cache_creation_tokens,
        proxied_calls=usage.proxied_calls + row.proxied_calls,
    )


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
