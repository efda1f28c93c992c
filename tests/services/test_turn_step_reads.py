"""A turn step skips the reads the session row it has just loaded shows to be unnecessary: the
mailbox drain (``mailbox_pending``) and the checkpoint check of an extended Conversation read
(``latest_compaction_id``). Statements are counted on the engine."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.content import Role, text_block
from app.core.counting import ESTIMATE
from app.services.tokens import CountedConversation, load_counted
from app.services.turns.mailbox import drain_mailbox
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import (
    CompactionRepository,
    MailboxRepository,
    MessageRepository,
    NewMessage,
    SessionRepository,
)
from tests.conftest import recorded_statements, touching
from tests.storage.conftest import new_agent_session
from tests.storage.test_compactions import checkpoint

pytestmark = pytest.mark.anyio


async def new_session(factory: SessionFactory) -> str:
    async with unit_of_work(factory) as db:
        return (await SessionRepository(db).add(new_agent_session())).id


async def append(factory: SessionFactory, sid: str, *texts: str) -> None:
    def message(index: int, text: str) -> NewMessage:
        role: Role = "user" if index % 2 == 0 else "assistant"
        return NewMessage(role=role, kind="normal", content=[text_block(text)])

    async with unit_of_work(factory) as db:
        await MessageRepository(db).append(sid, [message(i, t) for i, t in enumerate(texts)])


async def test_an_empty_mailbox_is_not_queried(
    engine: AsyncEngine, factory: SessionFactory
) -> None:
    sid = await new_session(factory)
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        with recorded_statements(engine) as statements:
            assert await drain_mailbox(db, sid, "turn-1", ESTIMATE, pending=0) == 0
    assert session.mailbox_pending == 0
    assert statements == []


async def test_a_pending_count_drains_and_returns_to_zero(
    engine: AsyncEngine, factory: SessionFactory
) -> None:
    sid = await new_session(factory)
    async with unit_of_work(factory) as db:
        box = MailboxRepository(db)
        for message_id in ("m1", "m2"):
            await box.enqueue(sid, agent_message_id=message_id, task="t", kind="failed", body="b")
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        assert session.mailbox_pending == 2
        with recorded_statements(engine) as statements:
            drained = await drain_mailbox(
                db, sid, "turn-1", ESTIMATE, pending=session.mailbox_pending
            )
        assert drained == 2
        assert touching(statements, "agent_messages")
        assert session.mailbox_pending == 0
    async with unit_of_work(factory, read_only=True) as db:
        stored = await MessageRepository(db).load(sid)
        assert [m.kind for m in stored] == ["agent_message", "agent_message"]
        assert (await SessionRepository(db).require(sid)).mailbox_pending == 0
        assert await MailboxRepository(db).pending(sid) == []


async def test_without_a_count_the_mailbox_is_queried_as_before(
    engine: AsyncEngine, factory: SessionFactory
) -> None:
    sid = await new_session(factory)
    async with unit_of_work(factory) as db:
        with recorded_statements(engine) as statements:
            assert await drain_mailbox(db, sid, "turn-1", ESTIMATE) == 0
    assert len(touching(statements, "agent_messages")) == 1


async def read(
    factory: SessionFactory, sid: str, previous: CountedConversation | None = None
) -> CountedConversation:
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        return await load_counted(db, session, ESTIMATE, previous)


async def test_an_extended_read_sees_new_checkpoints_without_querying_for_them(
    engine: AsyncEngine, factory: SessionFactory
) -> None:
    sid = await new_session(factory)
    await append(factory, sid, "one", "two")
    first = await read(factory, sid)

    await append(factory, sid, "three", "four")
    with recorded_statements(engine) as statements:
        extended = await read(factory, sid, first)
    assert not touching(statements, "conversation_compactions")
    assert [m.sequence for m in extended.active.stored] == [1, 2, 3, 4]
    assert extended.active.checkpoint is None

    async with unit_of_work(factory, read_only=True) as db:
        (last_user,) = await MessageRepository(db).load(sid, after_sequence=2, through_sequence=3)
    async with unit_of_work(factory) as db:
        await CompactionRepository(db).add(
            checkpoint(
                sid,
                "c1",
                through_message_sequence=3,
                replaced_through_message_sequence=3,
                source_message_count=3,
                last_user_message_id=last_user.message_id,
                last_user_message_sequence=3,
            )
        )
    rebuilt = await read(factory, sid, extended)
    assert rebuilt.active.checkpoint is not None
    assert rebuilt.active.checkpoint.compaction_id == "c1"
    assert [m.sequence for m in rebuilt.active.stored] == [4]
