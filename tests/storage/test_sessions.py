from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest

from app.core.errors import NotFound
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import SessionRepository
from tests.storage.conftest import MakeSession, new_agent_session

pytestmark = pytest.mark.anyio


async def watermark(factory: SessionFactory, sid: str, through: int) -> int:
    async with unit_of_work(factory) as db:
        return await SessionRepository(db).advance_pruning_watermark(sid, through)


async def test_watermark_never_moves_back(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    assert await watermark(factory, sid, 5) == 5
    assert await watermark(factory, sid, 3) == 5
    assert await watermark(factory, sid, 9) == 9

    targets = list(range(10, 40))
    random.Random(7).shuffle(targets)
    await asyncio.gather(*(watermark(factory, sid, t) for t in targets))
    async with unit_of_work(factory, read_only=True) as db:
        row = await SessionRepository(db).require(sid)
    assert row.tool_result_pruned_through_sequence == 39


async def test_loaded_session_sees_its_own_updates(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        repo = SessionRepository(db)
        row = await repo.require(sid, for_update=True)
        await repo.advance_pruning_watermark(sid, 4)
        await repo.allocate_message_sequences(sid, 3)
        assert await repo.allocate_event_sequences(sid, 2) == 2
        await repo.set_reload_required(sid, True)
        assert row.tool_result_pruned_through_sequence == 4
        assert row.last_message_sequence == 3
        assert row.last_event_sequence == 2
    async with unit_of_work(factory, read_only=True) as db:
        again = await SessionRepository(db).require(sid)
    assert again.reload_required
    assert again.last_message_sequence == 3


async def test_unknown_session(factory: SessionFactory) -> None:
    async with unit_of_work(factory) as db:
        repo = SessionRepository(db)
        assert await repo.get("nope") is None
        with pytest.raises(NotFound):
            await repo.advance_pruning_watermark("nope", 1)
        with pytest.raises(NotFound):
            await repo.allocate_event_sequences("nope", 1)
        assert not await repo.delete("nope")


async def test_list_pages_newest_first(factory: SessionFactory) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    prefix = f"ses-list-{random.randrange(10**9)}-"
    async with unit_of_work(factory) as db:
        repo = SessionRepository(db)
        for i in range(5):
            row = new_agent_session(f"{prefix}{i}")
            # Far future, so rows of other tests (created "now") sort after ours.
            row.created_at = base + timedelta(days=36500, seconds=i // 2)
            await repo.add(row)
    try:
        async with unit_of_work(factory, read_only=True) as db:
            repo = SessionRepository(db)
            first = await repo.list_page("default", limit=3)
            cursor = (first[-1].created_at, first[-1].id)
            second = await repo.list_page("default", limit=3, before=cursor)
    finally:
        # The database is shared by the run's PostgreSQL tests: rows from the far future would
        # head every later listing (and their ids are not ones the API hands out).
        async with unit_of_work(factory) as db:
            for i in range(5):
                await SessionRepository(db).delete(f"{prefix}{i}")
    ids = [r.id for r in first] + [r.id for r in second]
    assert ids[:5] == [f"{prefix}{i}" for i in (4, 3, 2, 1, 0)]


async def test_delete_cascades(factory: SessionFactory, make_session: MakeSession) -> None:
    from app.storage.repositories import EventRepository, MessageRepository, NewMessage

    sid = await make_session()
    async with unit_of_work(factory) as db:
        await MessageRepository(db).append(
            sid, [NewMessage(role="user", kind="normal", content=[{"type": "text", "text": "x"}])]
        )
        await EventRepository(db).append(sid, "turn_started", {"turn_id": "t"})
    async with unit_of_work(factory) as db:
        assert await SessionRepository(db).delete(sid)
    async with unit_of_work(factory, read_only=True) as db:
        assert await MessageRepository(db).load(sid) == []
        assert await EventRepository(db).list_after(sid) == []
