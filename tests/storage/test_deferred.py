"""Deferred writes (``app.storage.deferred``): a transaction that defers queues its writes and
sends them before its next statement or at its commit; what is stored is exactly what
``Session.execute`` stores, a read sees every write made before it, a rollback stores nothing,
and the database's refusal surfaces as SQLAlchemy's error with nothing of the transaction kept.
Both engines (``factory`` runs on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.core.errors import Conflict
from app.storage.database import SessionFactory, unit_of_work
from app.storage.deferred import checked_write, defer, write
from app.storage.models import AgentSession, SessionEvent
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio

_events = cast(Table, SessionEvent.__table__)
_sessions = cast(Table, AgentSession.__table__)
_INSERT = insert(_events)
_TITLE = (
    update(_sessions)
    .where(_sessions.c.id == bindparam("k_id"))
    .values(title=bindparam("v_title"), updated_at=bindparam("v_at"))
    .returning(_sessions.c.title)
)
_WHEN = datetime(2026, 12, 3, 10, 11, 12, 345678, tzinfo=UTC)


def _title(session_id: str, title: str) -> dict[str, Any]:
    return {"k_id": session_id, "v_title": title, "v_at": _WHEN}


def _event(session_id: str, sequence: int, payload: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "sequence": sequence,
        "type": "phase_changed",
        "turn_id": "t1",
        "payload": payload,
        "created_at": _WHEN,
    }


async def _stored(factory: SessionFactory, session_id: str) -> list[tuple[Any, ...]]:
    async with unit_of_work(factory, read_only=True) as db:
        rows = await db.execute(
            select(_events.c.sequence, _events.c.payload, _events.c.created_at)
            .where(_events.c.session_id == session_id)
            .order_by(_events.c.sequence)
        )
        return [tuple(row) for row in rows]


async def _raw_rows(factory: SessionFactory, session_id: str) -> list[tuple[Any, ...]]:
    """The rows as the database holds them (the text of JSON and of SQLite's timestamps)."""
    async with unit_of_work(factory, read_only=True) as db:
        connection = await db.connection()
        cast_text = "CAST(payload AS TEXT), CAST(created_at AS TEXT)"
        rows = await connection.exec_driver_sql(
            f"SELECT sequence, {cast_text} FROM session_events "
            f"WHERE session_id = '{session_id}' ORDER BY sequence"
        )
        return [tuple(row) for row in rows]


async def test_deferred_writes_store_exactly_what_execute_stores(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    direct, deferred = await make_session(), await make_session()
    payload = {"phase": "running_tools", "note": "naïve ✓", "n": [1, 2.5, None]}
    async with unit_of_work(factory) as db:
        await db.execute(_INSERT, [_event(direct, 1, payload), _event(direct, 2, {})])
    async with unit_of_work(factory) as db:
        await defer(db)
        await write(db, _INSERT, [_event(deferred, 1, payload), _event(deferred, 2, {})])
    assert await _stored(factory, deferred) == await _stored(factory, direct)
    assert await _raw_rows(factory, deferred) == await _raw_rows(factory, direct)
    assert (await _stored(factory, deferred))[0] == (1, payload, _WHEN)


@pytest.mark.parametrize("count", [3, 17, 40])
async def test_rows_of_an_insert_go_as_multi_row_statements_storing_the_same(
    factory: SessionFactory, make_session: MakeSession, count: int
) -> None:
    """Several rows of a plain INSERT are sent as ``INSERT ... VALUES (...), (...)`` in chunks
    of at most ``MULTIROW_CHUNK`` rows (one statement each, not one per row), and the database
    holds exactly what an executemany stores."""
    from app.storage import deferred as module

    direct, deferred = await make_session(), await make_session()
    rows = [{"i": i, "text": f"naïve {i}", "x": [i / 3, None]} for i in range(count)]
    async with unit_of_work(factory) as db:
        await db.execute(_INSERT, [_event(direct, i + 1, r) for i, r in enumerate(rows)])
    async with unit_of_work(factory) as db:
        await defer(db)
        await write(db, _INSERT, [_event(deferred, i + 1, r) for i, r in enumerate(rows)])
        queue = module._queue_of(db)
        assert queue is not None
        chunks = -(-count // module.MULTIROW_CHUNK)
        assert len(queue.items) == chunks
        assert not any(item.many for item in queue.items)
        assert queue.items[0].compiled.sql.count("), (") == min(count, 16) - 1
    assert await _stored(factory, deferred) == await _stored(factory, direct)
    assert await _raw_rows(factory, deferred) == await _raw_rows(factory, direct)


async def test_a_read_sees_the_writes_queued_before_it(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await defer(db)
        await write(db, _INSERT, _event(sid, 1, {"a": 1}))
        await write(db, _INSERT, _event(sid, 2, {"a": 2}))
        count = select(_events.c.sequence).where(_events.c.session_id == sid)
        assert [row[0] for row in await db.execute(count)] == [1, 2]
        await write(db, _INSERT, _event(sid, 3, {"a": 3}))
    assert [row[0] for row in await _stored(factory, sid)] == [1, 2, 3]


async def test_a_rollback_discards_the_queue(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()

    async def abandoned() -> None:
        async with unit_of_work(factory) as db:
            await defer(db)
            await write(db, _INSERT, _event(sid, 1, {}))
            raise RuntimeError("abandon the unit of work")

    with pytest.raises(RuntimeError):
        await abandoned()
    assert await _stored(factory, sid) == []
    # The connection goes back to the pool with nothing queued: the next transaction on it
    # stores only its own writes.
    async with unit_of_work(factory) as db:
        await db.execute(_INSERT, _event(sid, 7, {}))
    assert [row[0] for row in await _stored(factory, sid)] == [7]


async def test_a_refused_write_fails_the_commit_and_nothing_is_kept(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()

    async def twice() -> None:
        async with unit_of_work(factory) as db:
            await defer(db)
            await write(db, _INSERT, _event(sid, 1, {}))
            await write(db, _INSERT, _event(sid, 1, {}))  # the same key: refused

    # A session's event sequence taken twice: the unit of work says how to repair it
    # (``app.storage.collisions``), with the database's refusal as its cause.
    with pytest.raises(Conflict) as refused:
        await twice()
    assert refused.value.code == "sequence_conflict"
    assert isinstance(refused.value.__cause__, IntegrityError)
    assert await _stored(factory, sid) == []


async def test_checked_writes_report_their_row_when_they_run(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    seen: list[Sequence[Any] | None] = []
    async with unit_of_work(factory) as db:
        await defer(db)
        await checked_write(db, _TITLE, _title(sid, "renamed"), seen.append)
        await checked_write(db, _TITLE, _title("ses-none", "x"), seen.append)
        assert seen == []  # queued: nothing has run yet
    assert [None if row is None else tuple(row) for row in seen] == [("renamed",), None]
    # Not deferring: at once.
    async with unit_of_work(factory) as db:
        await checked_write(db, _TITLE, _title(sid, "again"), seen.append)
        assert seen[-1] is not None
        assert tuple(seen[-1]) == ("again",)


async def test_a_check_that_raises_rolls_the_transaction_back(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()

    def refuse(row: Sequence[Any] | None) -> None:
        raise LookupError("the row is not what this transaction expected")

    async def refused() -> None:
        async with unit_of_work(factory) as db:
            await defer(db)
            await write(db, _INSERT, _event(sid, 1, {}))
            await checked_write(db, _TITLE, _title(sid, "renamed"), refuse)

    with pytest.raises(LookupError):
        await refused()
    assert await _stored(factory, sid) == []
    async with unit_of_work(factory, read_only=True) as db:
        title = await db.scalar(select(_sessions.c.title).where(_sessions.c.id == sid))
    assert title != "renamed"


async def test_a_write_that_needs_a_default_is_refused_before_anything_runs(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    incomplete = _event(sid, 1, {})
    del incomplete["created_at"]  # the column's default is computed by SQLAlchemy
    async with unit_of_work(factory) as db:
        await defer(db)
        with pytest.raises(ValueError, match="created_at"):
            await write(db, _INSERT, incomplete)
    assert await _stored(factory, sid) == []


async def test_a_session_used_again_after_its_commit_defers_its_next_transaction(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """The queue of a committed transaction went with its connection: the next transaction of
    the same session starts a queue of its own (before, asking for the old one raised
    ResourceClosedError)."""
    sid = await make_session()
    db = factory()
    try:
        for sequence in (1, 2):
            await defer(db)
            await write(db, _INSERT, _event(sid, sequence, {"n": sequence}))
            await db.commit()
    finally:
        await db.close()

    assert [row[:2] for row in await _stored(factory, sid)] == [(1, {"n": 1}), (2, {"n": 2})]


def test_the_compiled_statements_kept_stay_within_their_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqlalchemy.dialects import sqlite

    from app.storage import deferred

    monkeypatch.setattr(deferred, "_compiled", {})
    monkeypatch.setattr(deferred, "COMPILED_STATEMENTS", 3)
    statements = [insert(_events) for _ in range(5)]  # built per call: a new key each
    keys = frozenset(_event("s", 1, None))
    compiled = [deferred._compile(s, sqlite.dialect(), keys) for s in statements]
    assert len(deferred._compiled) <= 3
    # The one just compiled is kept, and is what compiling it again gives.
    assert deferred._compile(statements[-1], sqlite.dialect(), keys) is compiled[-1]
    assert compiled[0].sql == compiled[-1].sql
