from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from alembic import command
from app.core.content import Block, text_block
from app.storage.base import UTCDateTime, utc_now
from app.storage.database import (
    SessionFactory,
    create_engine,
    create_session_factory,
    sqlite_database_path,
    unit_of_work,
)
from app.storage.migrate import alembic_config, is_at_head, upgrade_to_head
from app.storage.models import AgentSession, Base, Compaction, WorldStateBaseline
from app.storage.repositories import (
    MessageRepository,
    NewMessage,
    SessionRepository,
    TurnRepository,
)
from tests.storage.conftest import new_agent_session
from tests.storage.test_compactions import checkpoint

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


INITIAL = "2026_11_30_1200"
SUMMARY_COLUMNS = {"mailbox_pending", "latest_compaction_id", "world_state_version"}
# The columns of ``sessions`` at the initial revision that have no server default.
_initial_sessions = sa.table(
    "sessions",
    *(sa.column(name) for name in ("id", "model_id", "summary_model_id")),
    *(sa.column(name, sa.JSON) for name in ("agent", "sandbox", "disabled_skills")),
    *(sa.column(name) for name in ("last_message_sequence", "last_event_sequence")),
    *(sa.column(name) for name in ("reload_required", "created_at", "updated_at")),
)


# ``conversation_compactions`` as the initial revision has it (no ``trigger_prepare_id`` yet).
_initial_compactions = sa.table(
    "conversation_compactions",
    *(
        sa.column(c.name, c.type)
        for c in Compaction.__table__.columns
        if c.name != "trigger_prepare_id"
    ),
)
# ``agent_messages`` as the initial revision has it (no ``sequence`` yet).
_initial_agent_messages = sa.table(
    "agent_messages",
    *(sa.column(name) for name in ("session_id", "agent_message_id", "task", "kind", "body")),
    sa.column("created_at", UTCDateTime()),
    sa.column("delivered_message_sequence"),
)


async def _downgrade_to(engine: AsyncEngine, revision: str) -> None:
    await _migrate(engine, command.downgrade, revision)


async def _upgrade_to(engine: AsyncEngine, revision: str) -> None:
    await _migrate(engine, command.upgrade, revision)


async def _migrate(engine: AsyncEngine, step: Callable[[Config, str], None], revision: str) -> None:
    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        step(config, revision)

    async with engine.connect() as connection:
        await connection.run_sync(run)
        await connection.commit()


async def _populate_initial(factory: SessionFactory) -> None:
    """Sessions s1 (two of three agent messages queued, two checkpoints, a baseline) and s2
    (nothing), written with the initial revision's columns only."""
    now = datetime.now(UTC)
    agent = {"system_prompt": "x", "tools": [], "max_model_calls": 20}
    async with unit_of_work(factory) as db:
        for sid in ("s1", "s2"):
            await db.execute(
                sa.insert(_initial_sessions).values(
                    id=sid,
                    model_id="local/test",
                    summary_model_id="local/test",
                    agent=agent,
                    sandbox={"mode": "auto", "available": True},
                    disabled_skills=[],
                    last_message_sequence=0,
                    last_event_sequence=0,
                    reload_required=False,
                    created_at=now,
                    updated_at=now,
                )
            )
        for i, delivered in enumerate((None, 7, None)):
            await db.execute(
                sa.insert(_initial_agent_messages).values(
                    session_id="s1",
                    agent_message_id=f"m{i}",
                    task="t",
                    kind="final_answer",
                    body="b",
                    created_at=now,
                    delivered_message_sequence=delivered,
                )
            )
        # Added out of order: the latest is the highest sequence, not the last written.
        for compaction_id, sequence in (("c2", 2), ("c1", 1)):
            row = checkpoint("s1", compaction_id, sequence=sequence, created_at=now)
            values = {c.name: getattr(row, c.key) for c in _initial_compactions.columns}
            await db.execute(sa.insert(_initial_compactions).values({**values, "attempts": 0}))
        db.add(WorldStateBaseline(session_id="s1", section_id="project/AGENTS.md", body="a"))


async def _summaries(engine: AsyncEngine) -> dict[str, tuple[object, ...]]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            sa.text(
                "SELECT id, mailbox_pending, latest_compaction_id, world_state_version "
                "FROM sessions ORDER BY id"
            )
        )
        return {row[0]: tuple(row[1:]) for row in rows}


async def _session_columns_and_children(engine: AsyncEngine) -> tuple[set[str], list[int]]:
    def read(connection: Connection) -> tuple[set[str], list[int]]:
        columns = {c["name"] for c in inspect(connection).get_columns("sessions")}
        counts = [
            connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("agent_messages", "conversation_compactions", "world_state_baselines")
        ]
        return columns, counts

    async with engine.connect() as connection:
        return await connection.run_sync(read)


async def test_session_summaries_are_backfilled_and_dropped_again(empty_database_url: str) -> None:
    path = sqlite_database_path(empty_database_url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(empty_database_url)
    try:
        await _upgrade_to(engine, INITIAL)
        await _populate_initial(create_session_factory(engine))
        await upgrade_to_head(empty_database_url)

        summaries = await _summaries(engine)
        assert summaries["s1"][:2] == (2, "c2")
        assert summaries["s2"][:2] == (0, None)
        tokens = [str(s[2]) for s in summaries.values()]
        assert all(re.fullmatch("[0-9a-f]{32}", t) for t in tokens)
        assert len(set(tokens)) == 2

        await _downgrade_to(engine, INITIAL)
        columns, children = await _session_columns_and_children(engine)
        assert not columns & SUMMARY_COLUMNS
        # Nothing that references a session went with the dropped columns.
        assert children == [3, 2, 1]

        await upgrade_to_head(empty_database_url)
        assert await is_at_head(engine)
        again = await _summaries(engine)
        assert {k: v[:2] for k, v in again.items()} == {k: v[:2] for k, v in summaries.items()}
    finally:
        await engine.dispose()


async def _engine_at_head(url: str) -> AsyncEngine:
    path = sqlite_database_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    await upgrade_to_head(url)
    return create_engine(url)


async def test_turn_plans_come_back_from_turns_on_downgrade(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    plan = {"plan": [{"step": "a", "status": "in_progress"}], "updated_at": "2026-11-30T00:00:00Z"}
    try:
        factory = create_session_factory(engine)
        async with unit_of_work(factory) as db:
            sid = (await SessionRepository(db).add(new_agent_session())).id
            turns = TurnRepository(db)
            await turns.create_running(
                session_id=sid, turn_id="t1", client_request_id="r", input=[], phase="starting"
            )
            await turns.update_running(sid, "t1", plan=plan)
        await _downgrade_to(engine, "2026_11_30_1300")
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.text("SELECT turn_id, plan FROM turn_plans"))).all()
        assert [(r[0], json.loads(r[1]) if isinstance(r[1], str) else r[1]) for r in rows] == [
            ("t1", plan)
        ]
        await upgrade_to_head(empty_database_url)
        assert await is_at_head(engine)
    finally:
        await engine.dispose()


async def test_open_tool_calls_are_backfilled(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    calls: list[Block] = [
        {"type": "tool_call", "id": i, "name": "read", "input": "{}"} for i in ("a", "b")
    ]
    answer: list[Block] = [
        {"type": "tool_result", "id": "a", "name": "read", "output": [], "state": "success"}
    ]
    try:
        factory = create_session_factory(engine)
        async with unit_of_work(factory) as db:
            # Only the columns this older schema has (later revisions add session columns).
            sid = await _older_session(db)
            await MessageRepository(db).append(
                sid,
                [
                    NewMessage(role="user", kind="normal", content=[text_block("go")]),
                    NewMessage(role="assistant", kind="normal", content=calls),
                    NewMessage(role="tool", kind="normal", content=answer),
                ],
            )
        await _downgrade_to(engine, "2026_11_30_1400")
        await upgrade_to_head(empty_database_url)
        async with unit_of_work(factory, read_only=True) as db:
            assert (await SessionRepository(db).require(sid)).open_tool_calls == 1
    finally:
        await engine.dispose()


async def _older_session(db: AsyncSession) -> str:
    row = new_agent_session()
    given = ("id", "title", "model_id", "summary_model_id", "agent", "sandbox", "disabled_skills")
    now = utc_now()
    values = {k: getattr(row, k) for k in given} | {
        "last_message_sequence": 0,
        "last_event_sequence": 0,
        "reload_required": False,
        "created_at": now,
        "updated_at": now,
    }
    # A table of these columns alone: an INSERT into the mapped table would also write every
    # column with a default, which this older schema may not have yet.
    columns = AgentSession.__table__.c
    table = sa.table("sessions", *(sa.column(k, columns[k].type) for k in values))
    await db.execute(sa.insert(table).values(values))
    return row.id


async def test_exact_figures_of_tool_messages_are_forgotten(empty_database_url: str) -> None:
    """Stored tiktoken figures of tool messages predate the counted state line (spec §9)."""
    engine = await _engine_at_head(empty_database_url)
    calls: list[Block] = [{"type": "tool_call", "id": "a", "name": "read", "input": "{}"}]
    answer: list[Block] = [
        {"type": "tool_result", "id": "a", "name": "read", "output": [], "state": "error"}
    ]
    figure = {"tiktoken:o200k_base": 7}
    try:
        factory = create_session_factory(engine)
        # Just before the revision that forgets them, whichever revision that follows.
        revision = ScriptDirectory.from_config(alembic_config()).get_revision("2026_12_01_1300")
        assert isinstance(revision.down_revision, str)
        await _downgrade_to(engine, revision.down_revision)
        async with unit_of_work(factory) as db:
            # Only the columns this older schema has (later revisions add session columns).
            sid = await _older_session(db)
            await MessageRepository(db).append(
                sid,
                [
                    NewMessage("user", "normal", [text_block("go")], token_counts=figure),
                    NewMessage("assistant", "normal", calls, token_counts=figure),
                    NewMessage("tool", "normal", answer, token_counts=figure),
                ],
            )
        await upgrade_to_head(empty_database_url)
        async with unit_of_work(factory, read_only=True) as db:
            rows = await MessageRepository(db).load(sid)
        assert [(r.role, r.token_counts) for r in rows] == [
            ("user", figure),
            ("assistant", figure),
            ("tool", {}),
        ]
    finally:
        await engine.dispose()
