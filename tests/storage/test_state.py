from __future__ import annotations

import asyncio

import pytest

from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import (
    BaselineRepository,
    EventRepository,
    MailboxRepository,
    NewEvent,
)
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio


async def test_baselines_are_set_replaced_and_removed(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await BaselineRepository(db).apply(sid, {"project/AGENTS.md": "a", "skills/catalog": "s"})
    async with unit_of_work(factory) as db:
        await BaselineRepository(db).apply(sid, {"project/AGENTS.md": "b", "skills/catalog": None})
    async with unit_of_work(factory, read_only=True) as db:
        # None = the removal notice was sent (known absent), distinct from no baseline at all.
        assert await BaselineRepository(db).get_all(sid) == {
            "project/AGENTS.md": "b",
            "skills/catalog": None,
        }


async def test_mailbox_is_idempotent_and_drains_in_order(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        box = MailboxRepository(db)
        assert await box.enqueue(
            sid, agent_message_id="m1", task="t", kind="final_answer", body="1"
        )
        assert not await box.enqueue(sid, agent_message_id="m1", task="t", kind="failed", body="x")
    async with unit_of_work(factory) as db:
        box = MailboxRepository(db)
        assert await box.enqueue(sid, agent_message_id="m2", task="t", kind="failed", body="2")
    async with unit_of_work(factory) as db:
        box = MailboxRepository(db)
        pending = await box.pending(sid)
        assert [(m.agent_message_id, m.body) for m in pending] == [("m1", "1"), ("m2", "2")]
        assert await box.mark_delivered(sid, "m1", 7)
        assert not await box.mark_delivered(sid, "m1", 8)
    async with unit_of_work(factory, read_only=True) as db:
        assert [m.agent_message_id for m in await MailboxRepository(db).pending(sid)] == ["m2"]


async def test_events_get_increasing_sequences_and_replay(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()

    async def emit(n: int) -> None:
        async with unit_of_work(factory) as db:
            await EventRepository(db).append_many(
                sid, [NewEvent("text_delta", {"n": n, "i": i}, turn_id="t1") for i in range(3)]
            )

    await asyncio.gather(*(emit(n) for n in range(5)))
    async with unit_of_work(factory, read_only=True) as db:
        events = EventRepository(db)
        everything = await events.list_after(sid)
        replay = await events.list_after(sid, 12, limit=10)
    assert [e.sequence for e in everything] == list(range(1, 16))
    assert [e.sequence for e in replay] == [13, 14, 15]
    # Each transaction's events stay contiguous and in order.
    for start in range(0, 15, 3):
        chunk = everything[start : start + 3]
        assert [e.payload["i"] for e in chunk] == [0, 1, 2]
        assert len({e.payload["n"] for e in chunk}) == 1
