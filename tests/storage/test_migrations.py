from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from alembic import command
from app.storage.database import create_engine
from app.storage.migrate import alembic_config, is_at_head, upgrade_to_head
from app.storage.models import Base

pytestmark = pytest.mark.anyio


async def test_upgrade_head_leaves_no_autogenerate_diff(engine: AsyncEngine) -> None:
    def diff(connection: object) -> list[object]:
        context = MigrationContext.configure(
            connection,  # type: ignore[arg-type]
            opts={"compare_type": True, "compare_server_default": True},
        )
        return list(compare_metadata(context, Base.metadata))

    async with engine.connect() as connection:
        assert await connection.run_sync(diff) == []


async def test_migrated_database_is_at_head_and_has_partial_indexes(engine: AsyncEngine) -> None:
    assert await is_at_head(engine)

    def indexes(connection: object) -> dict[str, bool]:
        found = inspect(connection).get_indexes("turns") + inspect(connection).get_indexes(
            "tool_calls"
        )
        return {i["name"]: bool(i["unique"]) for i in found if i["name"]}

    async with engine.connect() as connection:
        found = await connection.run_sync(indexes)
    assert found["uq_turns_one_running_per_session"] is True
    assert found["uq_tool_calls_unresolved_call_id"] is True


async def test_concurrent_start_ups_migrate_once(empty_database_url: str) -> None:
    """Every replica calls upgrade_to_head at start-up; they must not trip over each other
    (and a SQLite file's missing directory is created)."""
    await asyncio.gather(*(upgrade_to_head(empty_database_url) for _ in range(3)))
    engine = create_engine(empty_database_url)
    try:
        assert await is_at_head(engine)
    finally:
        await engine.dispose()


async def test_downgrade_to_base_and_back(empty_database_url: str) -> None:
    await upgrade_to_head(empty_database_url)
    engine = create_engine(empty_database_url)

    def downgrade(connection: Connection) -> list[str]:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
        return [t for t in inspect(connection).get_table_names() if t != "alembic_version"]

    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(downgrade) == []
            await connection.commit()
        assert not await is_at_head(engine)
        await upgrade_to_head(empty_database_url)
        assert await is_at_head(engine)
    finally:
        await engine.dispose()


async def test_empty_or_unreachable_database_is_not_ready(tmp_path: Path) -> None:
    empty = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    unreachable = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing-dir' / 'x.db'}")
    try:
        assert not await is_at_head(empty)
        assert not await is_at_head(unreachable)
    finally:
        await empty.dispose()
        await unreachable.dispose()
