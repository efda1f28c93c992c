from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, OperationalError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage import database
from app.storage.database import (
    SessionFactory,
    create_engine,
    create_session_factory,
    on_commit,
    sqlite_database_path,
    transaction_values,
    unit_of_work,
)
from app.storage.migrate import upgrade_to_head
from app.storage.models import AgentSession
from app.storage.repositories import SessionRepository
from tests.conftest import admin_conninfo
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


async def _terminate_other_backends(url: str) -> None:
    """What a failover or a server-side idle timeout does to a pooled connection."""
    with psycopg.connect(admin_conninfo(url), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.mark.parametrize(("idle_seconds", "recovers"), [(0.0, True), (3600.0, False)])
async def test_an_idle_pooled_postgresql_connection_is_pinged_before_use(
    postgres_url: str, idle_seconds: float, recovers: bool
) -> None:
    # Idle at least ``idle_seconds``: pinged, and a dead connection is replaced unseen. Used
    # again sooner: not pinged (no round trip per transaction), so the dead one fails once.
    engine = create_engine(postgres_url, pool_size=1, ping_after_idle_seconds=idle_seconds)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar_one() == 1
        await _terminate_other_backends(postgres_url)
        if recovers:
            async with engine.connect() as connection:
                assert (await connection.execute(text("SELECT 2"))).scalar_one() == 2
        else:
            with pytest.raises(DBAPIError):
                async with engine.connect() as connection:
                    await connection.execute(text("SELECT 2"))
    finally:
        await engine.dispose()


def _trace_statements(engine: AsyncEngine, statements: list[str]) -> None:
    """Record every statement SQLite runs on the engine's connections."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.sqlite.set_trace_callback(statements.append)


async def test_sqlite_rolls_back_only_a_transaction_that_is_open(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'rollbacks.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    statements: list[str] = []
    _trace_statements(engine, statements)
    factory = create_session_factory(engine)

    async def abandoned() -> None:
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("ses-dropped"))
            await db.flush()
            raise RuntimeError("abandon the unit of work")

    try:
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("ses-kept"))
        # Committed: the pool's reset on return has nothing to roll back.
        assert "COMMIT" in statements
        assert "ROLLBACK" not in statements
        with pytest.raises(RuntimeError):
            await abandoned()
        assert statements.count("ROLLBACK") == 1
        async with unit_of_work(factory, read_only=True) as db:
            sessions = SessionRepository(db)
            assert await sessions.get("ses-kept") is not None
            assert await sessions.get("ses-dropped") is None
    finally:
        await engine.dispose()


async def test_sqlite_writer_waits_for_another_process_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    """The driver runs on the event loop's thread: while another process (here: another
    connection) holds the write lock, the loop keeps serving other tasks, and the write goes
    through once the lock is released."""
    path = tmp_path / "other.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    factory = create_session_factory(engine)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    ticks = 0

    async def ticker() -> None:
        # Releases the other writer only after the loop has run it ten times: the write can
        # only get through if the loop kept running while it waited (however slow the machine).
        nonlocal ticks
        while ticks < 10:
            await asyncio.sleep(0.01)
            ticks += 1
        other.execute("COMMIT")

    try:
        other.execute("BEGIN IMMEDIATE")
        ticking = asyncio.create_task(ticker())
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("ses-after"))
        await ticking
        assert ticks == 10  # the loop ran while the write waited
        async with unit_of_work(factory, read_only=True) as db:
            assert await SessionRepository(db).get("ses-after") is not None
    finally:
        other.close()
        await engine.dispose()


@pytest.mark.parametrize("holder", ["this process", "another process"])
async def test_sqlite_writer_gives_up_after_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "busy.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    factory = create_session_factory(engine)
    other = sqlite3.connect(path, isolation_level=None)
    release = asyncio.Event()

    held = asyncio.Event()

    async def hold_the_lock() -> None:
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("ses-holder"))
            held.set()
            await release.wait()

    holding = None
    try:
        if holder == "this process":
            holding = asyncio.create_task(hold_the_lock())
            await held.wait()
        else:
            other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(OperationalError, match="database is locked"):
            async with unit_of_work(factory) as db:
                await SessionRepository(db).add(new_agent_session("ses-late"))
        # Given up after the (200 ms) busy timeout, not the default 30 s one.
        assert 0.15 <= time.monotonic() - started < 20
        release.set()
        if holding is not None:
            await holding
        else:
            other.execute("ROLLBACK")
        # Nothing stuck: the next writer goes through at once.
        async with unit_of_work(factory) as db:
            await SessionRepository(db).add(new_agent_session("ses-next"))
        async with unit_of_work(factory, read_only=True) as db:
            sessions = SessionRepository(db)
            assert await sessions.get("ses-late") is None
            assert await sessions.get("ses-next") is not None
    finally:
        other.close()
        await engine.dispose()


async def test_on_commit_runs_after_the_outer_commit_only(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    calls: list[str] = []
    async with unit_of_work(factory) as db:
        on_commit(db, lambda: calls.append("first"))
        async with db.begin_nested():
            on_commit(db, lambda: calls.append("inside the savepoint"))
        assert calls == []  # a savepoint's release is not the commit
        (await SessionRepository(db).require(sid)).title = "t"
    assert calls == ["first", "inside the savepoint"]

    async def rolled_back() -> None:
        async with unit_of_work(factory) as db:
            on_commit(db, lambda: calls.append("rolled back"))
            raise RuntimeError("abandon")

    with pytest.raises(RuntimeError):
        await rolled_back()
    async with unit_of_work(factory) as db:
        (await SessionRepository(db).require(sid)).title = "again"
    assert calls == ["first", "inside the savepoint"]


async def test_transaction_values_last_until_the_transaction_or_a_savepoint_ends(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        kept = transaction_values(db).setdefault("k", {})
        kept["x"] = 1
        (await SessionRepository(db).require(sid)).title = "t"
        await db.flush()  # the ORM's inner transaction ends: the value stays
        assert transaction_values(db)["k"] == {"x": 1}
        async with db.begin_nested():
            pass
        assert kept == {}  # a savepoint ended
        kept["y"] = 2
    assert kept == {}  # the transaction ended
