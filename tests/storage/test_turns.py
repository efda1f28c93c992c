from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from app.core.errors import Conflict, NotFound
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Turn
from app.storage.repositories import TurnRepository
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio

TEXT_INPUT = [{"type": "text", "text": "do it"}]


async def start(
    factory: SessionFactory, sid: str, turn_id: str, request_id: str, **kw: object
) -> tuple[Turn, bool]:
    async with unit_of_work(factory) as db:
        return await TurnRepository(db).create_running(
            session_id=sid,
            turn_id=turn_id,
            client_request_id=request_id,
            input=TEXT_INPUT,
            phase="accepted",
            **kw,  # type: ignore[arg-type]
        )


async def test_same_client_request_id_returns_the_accepted_turn(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    turn, created = await start(factory, sid, "t1", "req-1")
    again, created_again = await start(factory, sid, "t2", "req-1")
    assert created
    assert not created_again
    assert again.turn_id == "t1"
    assert turn.status == "running"


async def test_a_second_running_turn_is_busy(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await start(factory, sid, "t1", "req-1")
    with pytest.raises(Conflict) as busy:
        await start(factory, sid, "t2", "req-2")
    assert busy.value.code == "busy"
    assert busy.value.extra["turn_id"] == "t1"

    async with unit_of_work(factory) as db:
        assert await TurnRepository(db).finish(
            sid, "t1", status="completed", outcome={"final_text": "done"}
        )
    turn, created = await start(factory, sid, "t2", "req-2")
    assert created
    assert turn.turn_id == "t2"


async def test_concurrent_starts_one_running_turn_wins(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """Two transactions on two connections race to insert a running turn: the database lets
    exactly one through (the partial unique index), whatever the interleaving."""
    sid = await make_session()

    async def racer(n: int) -> str:
        async with unit_of_work(factory) as db:
            repo = TurnRepository(db)
            try:
                await repo.create_running(
                    session_id=sid,
                    turn_id=f"t{n}",
                    client_request_id=f"req-{n}",
                    input=TEXT_INPUT,
                    phase="accepted",
                )
            except Conflict as exc:
                return exc.code
            # Hold the transaction open so the other racer's insert overlaps it (and waits).
            await asyncio.sleep(0.2)
            return "created"

    results = await asyncio.gather(racer(1), racer(2))
    assert sorted(results) == ["busy", "created"]
    async with unit_of_work(factory, read_only=True) as db:
        running = await TurnRepository(db).get_running(sid)
        assert running is not None
        assert len(await TurnRepository(db).list_for_session(sid)) == 1


async def test_advance_running_reports_the_cancel_flag_while_running(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    expires = datetime.now(UTC) + timedelta(minutes=1)
    await start(factory, sid, "t1", "req-1", lease_owner="me", lease_expires_at=expires)
    found: list[bool | None] = []
    async with unit_of_work(factory) as db:
        repo = TurnRepository(db)
        await repo.advance_running(sid, "t1", found.append, phase="running_model")
        assert await repo.request_cancel(sid, "t1")
        plan = {"plan": [{"step": "a", "status": "pending"}]}
        await repo.advance_running(sid, "t1", found.append, model_call_index=2, plan=plan)
        await repo.advance_running(
            sid,
            "t1",
            found.append,
            phase="waiting_tool_results",
            pending_tool_calls=["c1"],
            release_lease=True,
        )
        await repo.advance_running(sid, "missing", found.append, phase="x")
    assert found == [False, True, True, None]
    async with unit_of_work(factory, read_only=True) as db:
        turn = await TurnRepository(db).get(sid, "t1")
    assert turn is not None
    assert (turn.phase, turn.model_call_index, turn.plan, turn.pending_tool_calls) == (
        "waiting_tool_results",
        2,
        plan,
        ["c1"],
    )
    assert (turn.lease_owner, turn.lease_expires_at) == (None, None)
    async with unit_of_work(factory) as db:
        repo = TurnRepository(db)
        assert await repo.finish(sid, "t1", status="cancelled", outcome={})
        await repo.advance_running(sid, "t1", found.append, phase="late")
    assert found[-1] is None


async def test_finish_only_once_and_progress_only_while_running(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await start(factory, sid, "t1", "req-1")
    async with unit_of_work(factory) as db:
        repo = TurnRepository(db)
        assert await repo.update_running(
            sid, "t1", phase="waiting_tool_results", model_call_index=1, pending_tool_calls=["c1"]
        )
        assert await repo.add_usage(sid, "t1", input_tokens=100, output_tokens=7)
        assert await repo.add_usage(sid, "t1", input_tokens=50, cached_tokens=20)
        assert await repo.request_cancel(sid, "t1")
    async with unit_of_work(factory) as db:
        repo = TurnRepository(db)
        assert await repo.finish(sid, "t1", status="cancelled", outcome={"code": "cancelled"})
        assert not await repo.finish(sid, "t1", status="completed", outcome={})
        assert not await repo.update_running(sid, "t1", phase="late")
    async with unit_of_work(factory, read_only=True) as db:
        turn = await TurnRepository(db).get(sid, "t1")
    assert turn is not None
    assert (turn.status, turn.phase, turn.model_call_index) == (
        "cancelled",
        "waiting_tool_results",
        1,
    )
    assert (turn.input_tokens, turn.output_tokens, turn.cached_tokens) == (150, 7, 20)
    assert turn.cancel_requested
    assert turn.pending_tool_calls == []
    assert turn.finished_at is not None
    assert turn.finished_at.tzinfo is not None


async def test_expired_leases_become_interrupted(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    now = datetime.now(UTC)
    dead, alive, unleased = await make_session(), await make_session(), await make_session()
    await start(
        factory, dead, "t1", "r", lease_owner="a", lease_expires_at=now - timedelta(seconds=1)
    )
    await start(
        factory, alive, "t1", "r", lease_owner="b", lease_expires_at=now + timedelta(minutes=1)
    )
    await start(factory, unleased, "t1", "r")
    async with unit_of_work(factory) as db:
        repo = TurnRepository(db)
        assert not await repo.renew_lease(dead, "t1", owner="someone-else", expires_at=now)
        rows = await repo.interrupt_expired(now=now, outcome={"code": "process_restart"})
    done = {(t.session_id, t.turn_id) for t in rows}
    assert (dead, "t1") in done
    assert not {(alive, "t1"), (unleased, "t1")} & done
    assert all(t.status == "interrupted" for t in rows)
    async with unit_of_work(factory, read_only=True) as db:
        turn = await TurnRepository(db).get(dead, "t1")
    assert turn is not None
    assert turn.status == "interrupted"


async def test_plan_of_a_turn(factory: SessionFactory, make_session: MakeSession) -> None:
    sid = await make_session()
    await start(factory, sid, "t1", "r")
    async with unit_of_work(factory) as db:
        await TurnRepository(db).finish(sid, "t1", status="completed", outcome={})
    await start(factory, sid, "t2", "r2")
    plan = {"plan": [{"step": "a", "status": "completed"}]}
    async with unit_of_work(factory) as db:
        await TurnRepository(db).update_running(
            sid, "t2", plan={**plan, "updated_at": "2026-11-30T00:00:00Z"}
        )
    async with unit_of_work(factory, read_only=True) as db:
        turns = TurnRepository(db)
        # As the compaction's runtime state reads it: without the view's timestamp.
        assert await turns.plan_of(sid, "t2") == plan
        assert await turns.plan_of(sid, "t1") is None
        assert await turns.plan_of(sid, "t-none") is None


async def test_turn_of_unknown_session_is_not_found(factory: SessionFactory) -> None:
    with pytest.raises(NotFound):
        await start(factory, "ses-missing", "t1", "r")
