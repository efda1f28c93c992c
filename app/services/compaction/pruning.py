"""Pruning before summarizing (spec §7.2).

The watermark moves to the latest stored assistant message when a tool result in (old
watermark, new] is over 8192 characters, so the results of the most recent model response
are never pruned (they are after it). Pruning itself happens on every later request copy
(``app.core.pipeline.prune``); the stored messages never change. With a spill directory the full
text of
each newly pruned result is written first, so the marker's path leads to it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.content import Role
from app.core.pipeline.prune import PRUNE_THRESHOLD_CHARS, spill_file_name
from app.services.session_config import spill_directory_of
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = ["advance_pruning", "joined_result_text"]

log = logging.getLogger(__name__)


def joined_result_text(message: StoredMessage) -> tuple[str, str] | None:
    """``(tool call id, text blocks joined with \\n)`` of a tool message, as §2.1 measures it."""
    for block in message.content:
        if block["type"] == "tool_result":
            texts = [b["text"] for b in block["output"] if b["type"] == "text"]
            return block["id"], "\n".join(texts)
    return None


def _spill(directory: str, results: Sequence[tuple[str, str]]) -> None:
    for call_id, text in results:
        path = Path(directory) / spill_file_name(call_id)
        try:
            # "x": never overwrite (an earlier spill, e.g. a tool's own, is kept as it is) and
            # never follow a planted symlink (O_EXCL fails on any existing name).
            with path.open("x", encoding="utf-8") as handle:
                handle.write(text)
        except FileExistsError:
            continue


async def advance_pruning(db: AsyncSession, session_id: str) -> bool:
    """Advance the watermark in ``db``'s transaction; ``True`` when it moved.

    Raises on any failure (the caller treats that as "no pruning this time").
    """
    session = await SessionRepository(db).require(session_id, for_update=True)
    messages = MessageRepository(db)
    current = session.tool_result_pruned_through_sequence or 0
    through = await messages.last_sequence(session_id, role="assistant")
    if through is None or through <= current:
        return False
    tool_role: list[Role] = ["tool"]
    candidates = await messages.load(
        session_id, after_sequence=current, through_sequence=through, roles=tool_role
    )
    newly: list[tuple[str, str]] = []
    for row in candidates:
        joined = joined_result_text(row)
        if joined is not None and len(joined[1]) > PRUNE_THRESHOLD_CHARS:
            newly.append(joined)
    if not newly:
        return False
    spill_directory = spill_directory_of(session)
    if spill_directory:
        _spill(spill_directory, newly)
    moved_to = await SessionRepository(db).advance_pruning_watermark(session_id, through)
    log.info(
        "tool result pruning advanced",
        extra={"fields": {"session_id": session_id, "through": moved_to, "pruned": len(newly)}},
    )
    return moved_to > current
