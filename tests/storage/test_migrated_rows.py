"""Rows stored before a migration keep their meaning after it (and after a downgrade), on both
backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.base import UTCDateTime
from app.storage.database import create_session_factory, unit_of_work
from app.storage.migrate import is_at_head, upgrade_to_head
from app.storage.models import Turn
from app.storage.repositories import CompactionRepository, SessionRepository, TurnRepository
from app.storage.repositories.state import EventRepository, MailboxRepository
from app.storage.repositories.waiting_turns import WaitingTurnRepository
from tests.storage.conftest import new_agent_session
from tests.storage.test_compactions import checkpoint
from tests.storage.test_migrations import _downgrade_to, _engine_at_head, _initial_compactions

pytestmark = pytest.mark.anyio

BEFORE_MAILBOX_SEQUENCE = "2026_12_01_0900"

_old_agent_messages = sa.table(
    "agent_messages",
    *(sa.column(name) for name in ("session_id", "agent_message_id", "task", "kind", "body")),
    sa.column("created_at", UTCDateTime()),
    sa.column("delivered_message_sequence"),
)


async def _columns(engine: AsyncEngine, table: str) -> set[str]:
    async with engine.connect() as connection:
        return await connection.run_sync(
            lambda c: {col["name"] for col in sa.inspect(c).get_columns(table)}
        )


async def test_queued_agent_messages_keep_their_order(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    t0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    try:
        async with unit_of_work(factory) as db:
            first = (await SessionRepository(db).add(new_agent_session())).id
            other = (await SessionRepository(db).add(new_agent_session())).id
        await _downgrade_to(engine, BEFORE_MAILBOX_SEQUENCE)
        # Their old order: created_at, then id on a tie.
        rows = [
            (first, "b", t0 + timedelta(seconds=1), None),
            (first, "c", t0, None),
            (first, "a", t0 + timedelta(seconds=1), None),
            (first, "d", t0 - timedelta(seconds=5), 4),  # delivered long ago
            (other, "x", t0, None),
        ]
        async with engine.begin() as connection:
            for session_id, message_id, created_at, delivered in rows:
                await connection.execute(
                    sa.insert(_old_agent_messages).values(
                        session_id=session_id,
                        agent_message_id=message_id,
                        task="t",
                        kind="final_answer",
                        body=message_id,
                        created_at=created_at,
                        delivered_message_sequence=delivered,
                    )
                )
        await upgrade_to_head(empty_database_url)

        async with unit_of_work(factory) as db:
            mailbox = MailboxRepository(db)
            queued = [(m.agent_message_id, m.sequence) for m in await mailbox.pending(first)]
            assert queued == [("c", 2), ("a", 3), ("b", 4)]
            assert [(m.agent_message_id, m.sequence) for m in await mailbox.pending(other)] == [
                ("x", 1)
            ]
            # The next one queued follows them, whatever its clock says.
            assert await mailbox.enqueue(
                first, agent_message_id="e", task="t", kind="failed", body="e"
            )
            assert [m.agent_message_id for m in await mailbox.pending(first)] == [
                "c",
                "a",
                "b",
                "e",
            ]

        await _downgrade_to(engine, BEFORE_MAILBOX_SEQUENCE)
        assert "sequence" not in await _columns(engine, "agent_messages")
        async with engine.connect() as connection:
            count = await connection.execute(sa.text("SELECT count(*) FROM agent_messages"))
            assert count.scalar_one() == 6
        await upgrade_to_head(empty_database_url)
        assert await is_at_head(engine)
    finally:
        await engine.dispose()


BEFORE_TRIGGER_LINK = "2026_12_01_1000"
PREPARE_ID = "prepare-" + "ab" * 16

# ``session_events`` as it is at every revision.
_events = sa.table(
    "session_events",
    sa.column("session_id"),
    sa.column("sequence"),
    sa.column("type"),
    sa.column("turn_id"),
    sa.column("payload", sa.JSON()),
    sa.column("created_at", UTCDateTime()),
)


def _old_checkpoint(
    sid: str, compaction_id: str, sequence: int, **values: object
) -> dict[str, object]:
    row = checkpoint(sid, compaction_id, sequence=sequence, created_at=datetime.now(UTC))
    old = {c.name: getattr(row, c.key) for c in _initial_compactions.columns}
    return {**old, "attempts": 0, **values}


async def _links(engine: AsyncEngine, sid: str) -> dict[str, tuple[object, ...]]:
    async with engine.connect() as connection:
        columns = await connection.run_sync(
            lambda c: {col["name"] for col in sa.inspect(c).get_columns("conversation_compactions")}
        )
        prepare = "trigger_prepare_id" if "trigger_prepare_id" in columns else "NULL"
        rows = await connection.execute(
            sa.text(
                f"SELECT compaction_id, kind, trigger_turn_id, {prepare}, parent_compaction_id "
                "FROM conversation_compactions WHERE session_id = :sid ORDER BY sequence"
            ),
            {"sid": sid},
        )
        return {row[0]: tuple(row[1:]) for row in rows}


async def _event_links(engine: AsyncEngine, sid: str) -> list[tuple[object, object]]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            sa.select(_events.c.turn_id, _events.c.payload)
            .where(_events.c.session_id == sid)
            .order_by(_events.c.sequence)
        )
        return [(row[0], row[1].get("prepare_id")) for row in rows]


async def test_trigger_ids_that_name_no_turn_move_to_the_prepare_link(
    empty_database_url: str,
) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    try:
        async with unit_of_work(factory) as db:
            sid = (await SessionRepository(db).add(new_agent_session())).id
            await TurnRepository(db).create_running(
                session_id=sid, turn_id="t1", client_request_id="r1", input=[], phase="starting"
            )
        await _downgrade_to(engine, BEFORE_TRIGGER_LINK)
        async with engine.begin() as connection:
            for values in (
                _old_checkpoint(sid, "c1", 1),
                _old_checkpoint(sid, "c2", 2, kind="threshold", trigger_turn_id="t1"),
                _old_checkpoint(sid, "c3", 3, kind="threshold", trigger_turn_id=PREPARE_ID),
                # A rewind points at its parent: rebuilding the table must not lose it.
                _old_checkpoint(
                    sid,
                    "c4",
                    4,
                    kind="rewind",
                    parent_compaction_id="c3",
                    replaced_through_message_sequence=12,
                ),
            ):
                await connection.execute(sa.insert(_initial_compactions).values(values))
            for sequence, turn_id in enumerate((PREPARE_ID, "t1", None), start=1):
                await connection.execute(
                    sa.insert(_events).values(
                        session_id=sid,
                        sequence=sequence,
                        type="compaction_finished",
                        turn_id=turn_id,
                        payload={"status": "completed"},
                        created_at=datetime.now(UTC),
                    )
                )
        await upgrade_to_head(empty_database_url)

        assert await _links(engine, sid) == {
            "c1": ("manual", None, None, None),
            "c2": ("threshold", "t1", None, None),
            "c3": ("threshold", None, PREPARE_ID, None),
            "c4": ("rewind", None, None, "c3"),
        }
        assert await _event_links(engine, sid) == [(None, PREPARE_ID), ("t1", None), (None, None)]
        # The link is a foreign key now: a trigger turn that is no turn is refused.
        with pytest.raises(IntegrityError):
            async with unit_of_work(factory) as db:
                await CompactionRepository(db).add(
                    checkpoint(sid, "c5", kind="threshold", trigger_turn_id="prepare-x")
                )
        # The rebuilt table still cascades from its parent (SQLite) and from its session.
        async with unit_of_work(factory) as db:
            assert await SessionRepository(db).delete(sid)
        assert await _links(engine, sid) == {}
    finally:
        await engine.dispose()


async def test_the_prepare_link_goes_back_on_downgrade(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    try:
        async with unit_of_work(factory) as db:
            sid = (await SessionRepository(db).add(new_agent_session())).id
            await CompactionRepository(db).add(
                checkpoint(sid, "c1", kind="threshold", trigger_prepare_id=PREPARE_ID)
            )
            await CompactionRepository(db).add(
                checkpoint(
                    sid,
                    "c2",
                    kind="rewind",
                    parent_compaction_id="c1",
                    replaced_through_message_sequence=12,
                )
            )
            await EventRepository(db).append(sid, "compaction_finished", {"prepare_id": PREPARE_ID})
        await _downgrade_to(engine, BEFORE_TRIGGER_LINK)
        assert await _links(engine, sid) == {
            "c1": ("threshold", PREPARE_ID, None, None),
            "c2": ("rewind", None, None, "c1"),
        }
        assert await _event_links(engine, sid) == [(PREPARE_ID, None)]
        await upgrade_to_head(empty_database_url)
        assert await _links(engine, sid) == {
            "c1": ("threshold", None, PREPARE_ID, None),
            "c2": ("rewind", None, None, "c1"),
        }
        assert await is_at_head(engine)
    finally:
        await engine.dispose()


BEFORE_DEADLINES = "2026_12_01_1020"

_old_turns = sa.table(
    "turns",
    *(
        sa.column(c.name, c.type)
        for c in Turn.__table__.columns
        if c.name != "tool_results_deadline"
    ),
)


async def test_turns_already_waiting_get_the_default_deadline(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    now = datetime.now(UTC)
    try:
        async with unit_of_work(factory) as db:
            sids = [(await SessionRepository(db).add(new_agent_session())).id for _ in range(3)]
        await _downgrade_to(engine, BEFORE_DEADLINES)
        rows = [
            (sids[0], "waiting-long", "running", "waiting_tool_results", now - timedelta(hours=2)),
            (sids[1], "waiting-new", "running", "waiting_tool_results", now),
            (sids[2], "busy", "running", "running_model", now - timedelta(hours=2)),
        ]
        async with engine.begin() as connection:
            for session_id, turn_id, status, phase, updated_at in rows:
                await connection.execute(
                    sa.insert(_old_turns).values(
                        session_id=session_id,
                        turn_id=turn_id,
                        client_request_id="r",
                        status=status,
                        phase=phase,
                        input=[],
                        model_call_index=1,
                        pending_tool_calls=[],
                        input_tokens=0,
                        output_tokens=0,
                        cached_tokens=0,
                        reasoning_tokens=0,
                        cancel_requested=False,
                        created_at=updated_at,
                        updated_at=updated_at,
                    )
                )
        await upgrade_to_head(empty_database_url)

        async with unit_of_work(factory, read_only=True) as db:
            turns = TurnRepository(db)
            deadlines = {}
            for session_id, turn_id, *_ in rows:
                turn = await turns.get(session_id, turn_id)
                assert turn is not None
                deadlines[turn_id] = turn.tool_results_deadline
            overdue = await WaitingTurnRepository(db).overdue(now=datetime.now(UTC))
        assert deadlines == {
            "waiting-long": rows[0][4] + timedelta(hours=1),
            "waiting-new": rows[1][4] + timedelta(hours=1),
            "busy": None,
        }
        # The one a vanished caller left waiting for two hours is due at once.
        assert overdue == [(sids[0], "waiting-long")]
    finally:
        await engine.dispose()
