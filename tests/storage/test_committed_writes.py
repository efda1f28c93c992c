"""Only a committed transaction that wrote a row tells a write outage is over (spec §8):
reads, empty writes, rolled-back writes and savepoints do not; deferred writes do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage import deferred
from app.storage.committed_writes import notify_committed_writes
from app.storage.database import SessionFactory, create_engine, create_session_factory, unit_of_work
from app.storage.models import RegisteredModel

pytestmark = pytest.mark.anyio


@pytest.fixture
async def watched(database_url: str) -> AsyncIterator[tuple[SessionFactory, list[int]]]:
    engine: AsyncEngine = create_engine(database_url)
    commits: list[int] = []
    notify_committed_writes(engine, lambda: commits.append(1))
    try:
        yield create_session_factory(engine), commits
    finally:
        await engine.dispose()


def a_model(model_id: str) -> RegisteredModel:
    return RegisteredModel(
        id=model_id,
        context_window_tokens=1000,
        max_output_tokens=100,
        accepts_data_blocks=False,
        provider_kind="scripted",
        script=[],
    )


async def test_a_committed_insert_is_reported_once(
    watched: tuple[SessionFactory, list[int]],
) -> None:
    db, commits = watched
    async with unit_of_work(db) as session:
        session.add(a_model("m-insert"))
        await session.flush()
        session.add(a_model("m-insert-2"))
    assert commits == [1]


async def test_reads_and_writes_that_change_nothing_are_not_reported(
    watched: tuple[SessionFactory, list[int]],
) -> None:
    db, commits = watched
    async with unit_of_work(db) as session:  # a write transaction that only reads
        await session.execute(select(RegisteredModel))
    async with unit_of_work(db) as session:  # an UPDATE that matches no row
        await session.execute(
            update(RegisteredModel).where(RegisteredModel.id == "absent").values(script=[])
        )
    async with unit_of_work(db, read_only=True) as session:
        await session.execute(select(RegisteredModel))
    assert commits == []


async def test_a_rolled_back_write_is_not_reported(
    watched: tuple[SessionFactory, list[int]],
) -> None:
    db, commits = watched

    async def fail_after_a_write() -> None:
        async with unit_of_work(db) as session:
            session.add(a_model("m-rolled-back"))
            await session.flush()
            raise RuntimeError("the request failed after its write")

    with pytest.raises(RuntimeError):
        await fail_after_a_write()
    async with unit_of_work(db) as session:  # the next transaction on that connection
        await session.execute(select(RegisteredModel))
    assert commits == []


async def test_a_deferred_write_is_reported_at_its_commit(
    watched: tuple[SessionFactory, list[int]],
) -> None:
    db, commits = watched
    async with unit_of_work(db) as session:
        session.add(a_model("m-deferred"))
    commits.clear()
    async with unit_of_work(db) as session:
        await deferred.defer(session)
        stmt = update(RegisteredModel).where(RegisteredModel.id == "m-deferred")
        values = {"script_position": 3, "updated_at": datetime.now(UTC)}
        await deferred.write(session, stmt, values)
        assert commits == []  # queued, not sent yet
    assert commits == [1]
