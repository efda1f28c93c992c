"""The session row's summary columns follow the tables they summarize, in the same transaction:
``mailbox_pending``, ``latest_compaction_id`` and ``world_state_version``."""

from __future__ import annotations

import re

import pytest

from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories import (
    BaselineRepository,
    CompactionRepository,
    MailboxRepository,
    SessionRepository,
)
from tests.storage.conftest import MakeSession
from tests.storage.test_compactions import checkpoint

pytestmark = pytest.mark.anyio


class Rollback(Exception):
    """Raised inside a unit of work to roll it back."""


async def stored(factory: SessionFactory, sid: str) -> AgentSession:
    async with unit_of_work(factory, read_only=True) as db:
        return await SessionRepository(db).require(sid)


async def enqueue(box: MailboxRepository, sid: str, message_id: str) -> bool:
    return await box.enqueue(
        sid, agent_message_id=message_id, task="t", kind="final_answer", body="b"
    )


async def test_a_new_session_starts_empty_with_its_own_token(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    first, second = (
        await stored(factory, await make_session()),
        await stored(factory, await make_session()),
    )
    assert (first.mailbox_pending, first.latest_compaction_id) == (0, None)
    assert re.fullmatch("[0-9a-f]{32}", first.world_state_version)
    assert first.world_state_version != second.world_state_version


async def test_mailbox_pending_counts_queued_messages_once_until_delivered(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    before = (await stored(factory, sid)).updated_at
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        box = MailboxRepository(db)
        assert await enqueue(box, sid, "m1")
        assert not await enqueue(box, sid, "m1")  # a retried delivery
        # The row loaded in this transaction shows it without being read again.
        assert session.mailbox_pending == 1
    async with unit_of_work(factory) as db:
        assert not await enqueue(MailboxRepository(db), sid, "m1")
        assert await enqueue(MailboxRepository(db), sid, "m2")
    assert (await stored(factory, sid)).mailbox_pending == 2

    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        box = MailboxRepository(db)
        assert await box.mark_delivered(sid, "m1", 1)
        assert not await box.mark_delivered(sid, "m1", 2)
        assert session.mailbox_pending == 1
        assert await box.mark_delivered(sid, "m2", 3)
        assert session.mailbox_pending == 0
    after = await stored(factory, sid)
    assert after.mailbox_pending == 0
    # A summary column describes other tables: the session itself was not updated.
    assert after.updated_at == before


async def test_latest_compaction_id_follows_every_stored_checkpoint(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        await CompactionRepository(db).add(checkpoint(sid, "c1"))
        assert session.latest_compaction_id == "c1"
    async with unit_of_work(factory) as db:
        await CompactionRepository(db).add(
            checkpoint(sid, "c2", kind="rewind", parent_compaction_id="c1")
        )
    async with unit_of_work(factory, read_only=True) as db:
        latest = await CompactionRepository(db).latest(sid)
        assert latest is not None
        assert (await SessionRepository(db).require(sid)).latest_compaction_id == "c2"
        assert latest.compaction_id == "c2"


async def test_every_baseline_change_renews_the_world_state_version(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    seen = [(await stored(factory, sid)).world_state_version]
    for body in ("a", "b", None):
        async with unit_of_work(factory) as db:
            session = await SessionRepository(db).require(sid, for_update=True)
            version = await BaselineRepository(db).apply(sid, {"project/AGENTS.md": body})
            assert session.world_state_version == version
        seen.append(version)
        assert (await stored(factory, sid)).world_state_version == version
    assert len(set(seen)) == 4


async def test_a_rollback_leaves_every_summary_as_it_was(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await enqueue(MailboxRepository(db), sid, "m1")
        await CompactionRepository(db).add(checkpoint(sid, "c1"))
    before = await stored(factory, sid)

    async def change_everything_then_fail() -> None:
        async with unit_of_work(factory) as db:
            box = MailboxRepository(db)
            await enqueue(box, sid, "m2")
            await box.mark_delivered(sid, "m1", 1)
            await enqueue(box, sid, "m3")
            await CompactionRepository(db).add(
                checkpoint(sid, "c2", kind="rewind", parent_compaction_id="c1")
            )
            await BaselineRepository(db).apply(sid, {"project/AGENTS.md": "a"})
            raise Rollback

    with pytest.raises(Rollback):
        await change_everything_then_fail()

    after = await stored(factory, sid)
    assert (after.mailbox_pending, after.latest_compaction_id, after.world_state_version) == (
        1,
        "c1",
        before.world_state_version,
    )


async def test_a_row_loaded_under_the_lock_is_current_and_others_are_not(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    earlier = await stored(factory, sid)
    async with unit_of_work(factory) as db:
        repo = SessionRepository(db)
        unlocked = await repo.require(sid)
        await repo.lock(sid)
        # Built before the lock: it may show values another transaction has changed since.
        assert not repo.is_current(unlocked)
        assert await repo.require(sid, for_update=True) is unlocked
        assert not repo.is_current(unlocked)
    async with unit_of_work(factory) as db:
        repo = SessionRepository(db)
        locked = await repo.require(sid, for_update=True)
        assert repo.is_current(locked)
        assert not repo.is_current(earlier)  # another transaction's object
    assert not repo.is_current(locked)  # the transaction is over
