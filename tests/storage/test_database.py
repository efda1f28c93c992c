from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError

from app.storage.database import (
    SessionFactory,
    create_engine,
    create_session_factory,
    sqlite_database_path,
    unit_of_work,
)
from app.storage.migrate import upgrade_to_head
from app.storage.models import AgentSession
from app.storage.repositories import SessionRepository
from tests.storage.conftest import MakeSession, new_agent_session

pytestmark = pytest.mark.anyio


async def test_sqlite_connections_are_configured_for_a_server(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with engine.connect() as connection:
            pragmas = {
                name: (await connection.exec_driver_sql(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "foreign_keys", "busy_timeout")
            }
    finally:
        await engine.dispose()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 30_000}


async def test_unit_of_work_commits_or_rolls_back(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()

    async def change_then_fail() -> None:
        async with unit_of_work(factory) as db:
            (await SessionRepository(db).require(sid)).title = "changed"
            await db.flush()
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await change_then_fail()
    async with unit_of_work(factory) as db:
        row = await SessionRepository(db).require(sid)
        assert row.title is None
        row.title = "kept"
    async with unit_of_work(factory, read_only=True) as db:
        row = await SessionRepository(db).require(sid)
    assert row.title == "kept"  # still readable after the block


async def test_timestamps_are_aware_utc(factory: SessionFactory) -> None:
    paris = timezone(timedelta(hours=1))
    row = new_agent_session()
    row.created_at = datetime(2026, 6, 1, 12, 0, tzinfo=paris)
    async with unit_of_work(factory) as db:
        await SessionRepository(db).add(row)
    async with unit_of_work(factory, read_only=True) as db:
        loaded = await db.get(AgentSession, row.id)
    assert loaded is not None
    assert loaded.created_at == datetime(2026, 6, 1, 11, 0, tzinfo=UTC)
    assert loaded.created_at.utcoffset() == timedelta(0)

    async def add_naive() -> None:
        async with unit_of_work(factory) as db:
            bad = new_agent_session()
            bad.created_at = datetime(2026, 6, 1, 12, 0)
            await SessionRepository(db).add(bad)

    with pytest.raises(StatementError, match="naive"):
        await add_naive()


async def test_sqlite_writers_queue_instead_of_failing(tmp_path: Path) -> None:
    """Two writers that both read before writing would deadlock on lock upgrade in SQLite's
    deferred mode ("database is locked"); IMMEDIATE transactions make the second one wait."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    factory = create_session_factory(engine)
    try:
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("s1"))

        async def read_then_write(title: str) -> None:
            async with unit_of_work(factory) as db:
                row = await SessionRepository(db).require("s1")
                await asyncio.sleep(0.05)
                row.title = title

        await asyncio.gather(*(read_then_write(f"t{i}") for i in range(4)))
        async with unit_of_work(factory, read_only=True) as db:
            assert (await db.execute(text("SELECT count(*) FROM sessions"))).scalar() == 1
    finally:
        await engine.dispose()


def test_sqlite_database_path() -> None:
    assert sqlite_database_path("sqlite+aiosqlite:///./data/ctxsvc.db") == Path("./data/ctxsvc.db")
    assert sqlite_database_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_database_path("postgresql+psycopg://u@h/db") is None
