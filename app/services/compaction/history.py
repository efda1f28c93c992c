"""The ``conversation_history`` model tool (spec §7.7), for the turn runner.

Read-only: the same query as ``GET .../transcript`` with camelCase arguments. Bad arguments and
an unknown checkpoint are error results the model sees (the turn continues), never exceptions.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction import parse_conversation_history_arguments, render_transcript_page
from app.core.errors import InvalidInput, NotFound
from app.services.compaction.reads import read_transcript

__all__ = ["conversation_history_result"]


async def conversation_history_result(
    db: AsyncSession, session_id: str, raw_arguments: str
) -> tuple[str, Literal["success", "error"]]:
    """``(result text, state)``: the page as compact JSON, or the reason it was refused."""
    try:
        query = parse_conversation_history_arguments(raw_arguments)
        page, _ = await read_transcript(db, session_id, query)
    except (InvalidInput, NotFound) as exc:
        return exc.detail, "error"
    return render_transcript_page(page), "success"
