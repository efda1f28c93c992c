"""A turn step writes several times under one lock of the session row: its sequence counters
are written once (``SessionRepository.defer_counters``), calls it opened need no look-up when it
answers them, and it can read back what it appended without a query
(``MessageRepository.appended_after``). Statements are counted on the engine."""

from __future__ import annotations

import gc

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.content import Block, text_block
from app.core.errors import Conflict
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import (
    MessageRepository,
    NewMessage,
    SessionRepository,
    TurnRepository,
)
from tests.conftest import recorded_statements, touching
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio


def _assistant_call(call_id: str) -> NewMessage:
    content: list[Block] = [{"type": "tool_call", "id": call_id, "name": "read", "input": "{}"}]
    return NewMessage(role="assistant", kind="normal", content=content)


def _result(call_id: str) -> NewMessage:
    content: list[Block] = [
        {
            "type": "tool_result",
            "id": call_id,
            "name": "read",
            "output": [text_block("ok")],
            "state": "success",
        }
    ]
    return NewMessage(role="tool", kind="normal", content=content)


def _user(text: str) -> NewMessage:
    return NewMessage(role="user", kind="normal", content=[text_block(text)])


async def test_deferred_counters_are_written_by_one_update_at_commit(
    factory: SessionFactory, engine: AsyncEngine, make_session: MakeSession
) -> None:
    sid = await make_session()
    with recorded_statements(engine) as statements:
        async with unit_of_work(factory) as db:
            sessions = SessionRepository(db)
            row = await sessions.require(sid, for_update=True)
            sessions.defer_counters(row)
            messages = MessageRepository(db)
            first = await messages.append(sid, [_user("one"), _assistant_call("c1")])
            second = await messages.append(sid, [_result("c1")])
            assert await sessions.allocate_event_sequences(sid, 2) == 2
            assert [m.sequence for m in [*first, *second]] == [1, 2, 3]
            assert row.last_message_sequence == 3
    updates = touching(statements, "UPDATE sessions")
    assert len(updates) == 1, updates
    assert "last_message_sequence" in updates[0]
    assert "last_event_sequence" in updates[0]
    async with unit_of_work(factory) as db:
        stored = await SessionRepository(db).require(sid)
        assert (stored.last_message_sequence, stored.last_event_sequence) == (3, 2)
        assert [m.sequence for m in await MessageRepository(db).load(sid)] == [1, 2, 3]


async def test_counts_and_another_change_of_the_row_are_both_written(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    # The prebuilt UPDATE writes counts only; a row changed otherwise goes through the ORM.
    sid = await make_session()
    async with unit_of_work(factory) as db:
        sessions = SessionRepository(db)
        row = await sessions.require(sid, for_update=True)
        sessions.defer_counters(row)
        await MessageRepository(db).append(sid, [_user("one"), _user("two")])
        row.title = "renamed"
    async with unit_of_work(factory) as db:
        stored = await SessionRepository(db).require(sid)
        assert (stored.title, stored.last_message_sequence) == ("renamed", 2)


async def test_a_deferred_count_reaches_the_row_before_the_row_is_counted_on(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        sessions = SessionRepository(db)
        row = await sessions.require(sid, for_update=True)
        sessions.defer_counters(row)
        await MessageRepository(db).append(sid, [_user("one"), _user("two")])
        # A savepoint ends what the transaction knows about its row: the next allocation is a
        # statement, and it must count from 2, not from the stored 0.
        async with db.begin_nested():
            pass
        (third,) = await MessageRepository(db).append(sid, [_user("three")])
        assert third.sequence == 3
        # The watermark UPDATE refreshes the object from the row: the counts must survive it.
        await sessions.advance_pruning_watermark(sid, 1)
        assert row.last_message_sequence == 3
    async with unit_of_work(factory) as db:
        assert (await SessionRepository(db).require(sid)).last_message_sequence == 3


async def test_a_result_for_a_call_opened_in_the_same_transaction_needs_no_lookup(
    factory: SessionFactory, engine: AsyncEngine, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        messages = MessageRepository(db)
        await messages.append(sid, [_user("go"), _assistant_call("c1")])
        with recorded_statements(engine) as statements:
            await messages.append(sid, [_result("c1")])
        assert not [s for s in statements if s.startswith("SELECT tool_calls")]
        # Answered in this transaction: a second result for it is refused, as it is later.
        with pytest.raises(Conflict) as refused:
            await messages.append(sid, [_result("c1")])
        assert refused.value.code == "tool_result_already_posted"
    async with unit_of_work(factory) as db:
        messages = MessageRepository(db)
        with pytest.raises(Conflict) as duplicate:
            await messages.append(sid, [_result("c1")])
        assert duplicate.value.code == "tool_result_already_posted"


async def test_a_call_id_opened_in_the_same_transaction_cannot_be_opened_again(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        messages = MessageRepository(db)
        await messages.append(sid, [_user("go"), _assistant_call("c1")])
        with pytest.raises(Conflict) as refused:
            await messages.append(sid, [_assistant_call("c1")])
        assert refused.value.code == "duplicate_tool_call_id"


async def test_appended_after_covers_only_a_range_this_transaction_wrote(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await MessageRepository(db).append(sid, [_user("earlier")])
    async with unit_of_work(factory) as db:
        messages = MessageRepository(db)
        written = await messages.append(sid, [_user("a"), _user("b")])
        assert messages.appended_after(sid, 1, 3) == written
        assert messages.appended_after(sid, 2, 3) == written[1:]
        assert messages.appended_after(sid, 3, 3) == []
        # Sequence 1 was written by another transaction: it must be read.
        assert messages.appended_after(sid, 0, 3) is None
        # A later sequence this transaction did not write: read as well.
        assert messages.appended_after(sid, 1, 4) is None
    async with unit_of_work(factory) as db:
        # Forgotten when the transaction ends.
        assert MessageRepository(db).appended_after(sid, 1, 3) is None


async def test_deferred_counts_survive_a_flush_and_a_dropped_reference(
    factory: SessionFactory, engine: AsyncEngine, make_session: MakeSession
) -> None:
    sid = await make_session()
    with recorded_statements(engine) as statements:
        async with unit_of_work(factory) as db:
            sessions = SessionRepository(db)
            # The caller keeps no reference to the locked row (the turn's finish step does not).
            sessions.defer_counters(await sessions.require(sid, for_update=True))
            gc.collect()
            # An ORM flush runs in an inner transaction: it must not end the deferral (a turn
            # start flushes its new turn row, then appends).
            await TurnRepository(db).create_running(
                session_id=sid,
                turn_id="t1",
                client_request_id="r",
                input=[],
                phase="x",
                checked=True,
            )
            await MessageRepository(db).append(sid, [_user("one")])
            await MessageRepository(db).append(sid, [_user("two")])
    assert len(touching(statements, "UPDATE sessions")) == 1
    async with unit_of_work(factory) as db:
        assert (await SessionRepository(db).require(sid)).last_message_sequence == 2
        assert [m.sequence for m in await MessageRepository(db).load(sid)] == [1, 2]


async def test_a_call_answered_in_its_own_batch_is_inserted_answered(
    factory: SessionFactory, engine: AsyncEngine, make_session: MakeSession
) -> None:
    sid = await make_session()
    batch = [_user("go"), _assistant_call("c1"), _result("c1"), _assistant_call("c1")]
    with recorded_statements(engine) as statements:
        async with unit_of_work(factory) as db:
            stored = await MessageRepository(db).append(sid, batch)
    assert not [s for s in statements if s.startswith("UPDATE tool_calls")]
    async with unit_of_work(factory) as db:
        messages = MessageRepository(db)
        calls = await messages.list_tool_calls(sid, stored[1].sequence)
        assert [(c.call_id, c.result_sequence) for c in calls] == [("c1", stored[2].sequence)]
        # The id was answered, then opened again by the last message: that call is the open one.
        (open_call,) = await messages.list_unresolved_tool_calls(sid)
        assert open_call.message_sequence == stored[3].sequence
        await messages.append(sid, [_result("c1")])
        assert await messages.list_unresolved_tool_calls(sid) == []


async def _open_calls(factory: SessionFactory, sid: str) -> int:
    async with unit_of_work(factory, read_only=True) as db:
        return (await SessionRepository(db).require(sid)).open_tool_calls


@pytest.mark.parametrize("deferred", [False, True])
async def test_the_session_counts_its_calls_without_a_result(
    factory: SessionFactory, make_session: MakeSession, deferred: bool
) -> None:
    sid = await make_session()

    async def append(*batch: NewMessage) -> None:
        async with unit_of_work(factory) as db:
            if deferred:
                sessions = SessionRepository(db)
                sessions.defer_counters(await sessions.require(sid, for_update=True))
            await MessageRepository(db).append(sid, list(batch))

    await append(_user("go"), _assistant_call("c1"), _assistant_call("c2"))
    assert await _open_calls(factory, sid) == 2
    await append(_result("c1"))
    assert await _open_calls(factory, sid) == 1
    # Answered earlier, opened and answered in the batch, opened and left open: 1 − 1 + 0 + 1.
    await append(_result("c2"), _assistant_call("c3"), _result("c3"), _assistant_call("c4"))
    assert await _open_calls(factory, sid) == 1


async def test_a_step_looks_calls_up_only_when_others_than_its_own_are_open(
    factory: SessionFactory, engine: AsyncEngine, make_session: MakeSession
) -> None:
    sid = await make_session()

    async def step_append(*batch: NewMessage) -> list[str]:
        with recorded_statements(engine) as statements:
            async with unit_of_work(factory) as db:
                sessions = SessionRepository(db)
                sessions.defer_counters(await sessions.require(sid, for_update=True))
                await MessageRepository(db).append(sid, list(batch))
        return [s for s in statements if s.startswith("SELECT tool_calls")]

    # Nothing open: a new call id cannot duplicate anything.
    assert await step_append(_user("go"), _assistant_call("c1")) == []
    # c1 is open now (from an earlier transaction): new ids must be checked against it.
    assert len(await step_append(_result("c1"), _assistant_call("c1"))) == 1
    with pytest.raises(Conflict) as duplicate:
        await step_append(_assistant_call("c1"))
    assert duplicate.value.code == "duplicate_tool_call_id"
