"""Read-only views of checkpoints: list, one, replay and transcript (spec §7.7).

All of them read inside one read-only transaction and write nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction import (
    Checkpoint,
    CompactionSelector,
    LatestSelector,
    TranscriptPage,
    TranscriptQuery,
    compacted_projection,
    compaction_not_found,
    parse_replay_selector,
    transcript_page,
    unknown_compaction_id,
)
from app.core.content import Item
from app.services.conversation import load_active, load_checkpoint
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Compaction
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = [
    "CheckpointPage",
    "CompactionReads",
    "Replay",
    "Transcript",
    "get_checkpoint",
    "list_checkpoints",
    "read_transcript",
    "replay",
]


@dataclass(frozen=True, slots=True)
class CheckpointPage:
    """A session's checkpoints, newest first; ``next_before_sequence`` pages further back."""

    compactions: list[Compaction]
    next_before_sequence: int | None


@dataclass(frozen=True, slots=True)
class Replay:
    """The projection a replay selector names (``ReplayOut``)."""

    selector: str
    compaction_id: str | None
    through_message_sequence: int
    items: list[Item]


@dataclass(frozen=True, slots=True)
class Transcript:
    """One page of the raw messages a checkpoint covers, with their stored rows."""

    page: TranscriptPage
    rows: dict[int, StoredMessage]

    @property
    def messages(self) -> list[StoredMessage]:
        return [self.rows[m.sequence or 0] for m in self.page.messages]


async def list_checkpoints(
    db: AsyncSession, session_id: str, *, limit: int, before_sequence: int | None
) -> CheckpointPage:
    """Newest first; ``next_before_sequence`` pages further back."""
    await SessionRepository(db).require(session_id)
    rows = list(
        await CompactionRepository(db).list_for_session(
            session_id, limit=limit + 1, before_sequence=before_sequence
        )
    )
    page = rows[:limit]
    return CheckpointPage(page, page[-1].sequence if len(rows) > limit else None)


async def get_checkpoint(db: AsyncSession, session_id: str, compaction_id: str) -> Compaction:
    await SessionRepository(db).require(session_id)
    row = await CompactionRepository(db).get(session_id, compaction_id)
    if row is None:
        raise compaction_not_found(compaction_id)
    return row


async def _checkpoint(
    db: AsyncSession, session_id: str, compaction_id: str | None, field: str
) -> Checkpoint:
    """The checkpoint ``field`` of the request names, or the latest one (``None``)."""
    repo = CompactionRepository(db)
    if compaction_id is None:
        row = await repo.latest(session_id)
        if row is None:
            raise compaction_not_found(None)
    else:
        row = await repo.get(session_id, compaction_id)
        if row is None:
            raise unknown_compaction_id(compaction_id, field)
    return await load_checkpoint(db, row)


async def replay(db: AsyncSession, session_id: str, selector: str) -> Replay:
    """The projection a selector names, rebuilt from stored rows only."""
    parsed = parse_replay_selector(selector)
    session = await SessionRepository(db).require(session_id)
    messages = MessageRepository(db)
    last = await messages.last_sequence(session_id) or 0
    checkpoint: Checkpoint | None
    if isinstance(parsed, LatestSelector):
        active = await load_active(db, session)
        checkpoint, items, through = active.checkpoint, active.items, last
    elif isinstance(parsed, CompactionSelector):
        checkpoint = await _checkpoint(db, session_id, parsed.compaction_id, "selector")
        items = compacted_projection(checkpoint, [])
        through = checkpoint.through_message_sequence
    else:
        through = min(parsed.sequence, last)
        row = await CompactionRepository(db).latest_installed_through(session_id, parsed.sequence)
        checkpoint = await load_checkpoint(db, row) if row is not None else None
        floor = checkpoint.replaced_through_message_sequence if checkpoint is not None else 0
        raw = [
            m.to_item()
            for m in await messages.load(
                session_id, after_sequence=floor, through_sequence=parsed.sequence
            )
        ]
        items = compacted_projection(checkpoint, raw) if checkpoint is not None else raw
    compaction_id = checkpoint.compaction_id if checkpoint is not None else None
    return Replay(selector, compaction_id, through, items)


async def read_transcript(
    db: AsyncSession, session_id: str, query: TranscriptQuery
) -> tuple[TranscriptPage, dict[int, StoredMessage]]:
    """One page of the raw messages a checkpoint covers, and the rows by sequence."""
    await SessionRepository(db).require(session_id)
    checkpoint = await _checkpoint(db, session_id, query.compaction_id, "compaction_id")
    # One row more than the page tells whether another page follows.
    fetched = await MessageRepository(db).page(
        session_id,
        after_sequence=query.after_sequence,
        limit=query.limit + 1,
        through_sequence=checkpoint.through_message_sequence,
    )
    rows = {m.sequence: m for m in fetched.messages}
    page = transcript_page(checkpoint, [m.to_item() for m in fetched.messages], query)
    return page, rows


class CompactionReads:
    """The read-only endpoints, each one read-only transaction (mixed into the service)."""

    _db: SessionFactory

    async def list(
        self, session_id: str, *, limit: int = 50, before_sequence: int | None = None
    ) -> CheckpointPage:
        async with unit_of_work(self._db, read_only=True) as db:
            return await list_checkpoints(
                db, session_id, limit=limit, before_sequence=before_sequence
            )

    async def get(self, session_id: str, compaction_id: str) -> Compaction:
        async with unit_of_work(self._db, read_only=True) as db:
            return await get_checkpoint(db, session_id, compaction_id)

    async def replay(self, session_id: str, selector: str) -> Replay:
        async with unit_of_work(self._db, read_only=True) as db:
            return await replay(db, session_id, selector)

    async def transcript(
        self,
        session_id: str,
        *,
        compaction_id: str | None = None,
        after_sequence: int = 0,
        limit: int = 20,
    ) -> Transcript:
        query = TranscriptQuery(compaction_id, after_sequence, limit)
        async with unit_of_work(self._db, read_only=True) as db:
            page, rows = await read_transcript(db, session_id, query)
        return Transcript(page, rows)
