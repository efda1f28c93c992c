from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from app.core.content import Block
from app.core.errors import InvalidInput, NotFound, ServiceError
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession, ToolCall
from app.storage.repositories import MessageRepository, NewMessage, StoredMessage
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio


def user(text: str, **kw: Any) -> NewMessage:
    return NewMessage(role="user", kind="normal", content=[{"type": "text", "text": text}], **kw)


def assistant(*call_ids: str, text: str = "ok") -> NewMessage:
    content: list[Block] = [{"type": "text", "text": text}]
    content += [
        {"type": "tool_call", "id": cid, "name": "read", "input": '{"path":"a"}'}
        for cid in call_ids
    ]
    return NewMessage(role="assistant", kind="normal", content=content)


def tool(call_id: str, text: str = "result") -> NewMessage:
    return NewMessage(
        role="tool",
        kind="normal",
        content=[
            {
                "type": "tool_result",
                "id": call_id,
                "name": "read",
                "output": [{"type": "text", "text": text}],
                "state": "success",
                "artifacts": [{"kind": "file_change", "payload": {"path": "a"}}],
            }
        ],
    )


async def append(
    factory: SessionFactory, session_id: str, *msgs: NewMessage
) -> list[StoredMessage]:
    async with unit_of_work(factory) as db:
        return await MessageRepository(db).append(session_id, msgs)


async def sequences(factory: SessionFactory, session_id: str) -> list[int]:
    async with unit_of_work(factory, read_only=True) as db:
        return [m.sequence for m in await MessageRepository(db).load(session_id)]


async def test_appends_get_consecutive_sequences_and_round_trip(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    first = await append(factory, sid, user("héllo ✓"), assistant(text="hi"))
    second = await append(factory, sid, user("again"))
    assert [m.sequence for m in first + second] == [1, 2, 3]
    assert first[0].message_id.startswith("msg-")

    async with unit_of_work(factory, read_only=True) as db:
        loaded = await MessageRepository(db).load(sid)
    assert loaded == first + second
    # Content comes back exactly (key order included) and timestamps are aware UTC.
    assert list(loaded[0].content[0]) == ["type", "text"]
    assert loaded[0].created_at.utcoffset() is not None


async def test_cached_estimate_measure_ignores_artifacts(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    (_call, result) = await append(factory, sid, assistant("c1"), tool("c1"))
    expected = len(
        '[{"type":"tool_result","id":"c1","name":"read",'
        '"output":[{"type":"text","text":"result"}],"state":"success"}]'
    )
    assert result.content_bytes == expected
    item = result.to_item()
    assert item.cached is not None
    assert item.cached.measure == expected
    assert item.origin.sequence == 2  # type: ignore[union-attr]
    assert result.tool_call_id == "c1"
    assert result.tool_name == "read"


async def test_tool_results_must_answer_an_unresolved_call(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    with pytest.raises(ServiceError) as refused:
        await append(factory, sid, tool("nobody-called-me"))
    assert refused.value.code == "unknown_tool_call"

    await append(factory, sid, assistant("c1", "c2"), tool("c1"))
    async with unit_of_work(factory, read_only=True) as db:
        pending = await MessageRepository(db).list_unresolved_tool_calls(sid)
    assert [c.call_id for c in pending] == ["c2"]

    with pytest.raises(ServiceError) as twice:
        await append(factory, sid, tool("c1"))
    assert twice.value.code == "tool_result_already_posted"
    # A refused batch consumed no sequence.
    assert await sequences(factory, sid) == [1, 2]
    (answered,) = await append(factory, sid, tool("c2"))
    assert answered.sequence == 3


async def test_duplicate_unresolved_call_id_is_refused(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(factory, sid, assistant("c1"))
    with pytest.raises(ServiceError) as refused:
        await append(factory, sid, assistant("c1"))
    assert refused.value.code == "duplicate_tool_call_id"
    # Once resolved, the id may be used again; in one batch, in order.
    stored = await append(factory, sid, tool("c1"), assistant("c1"), tool("c1"))
    assert [m.sequence for m in stored] == [2, 3, 4]


async def test_database_refuses_duplicate_unresolved_call_id(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """The partial unique index is the backstop when a writer bypasses the repository."""
    sid = await make_session()
    await append(factory, sid, assistant("c1"), assistant("other"))
    with pytest.raises(IntegrityError):
        async with unit_of_work(factory) as db:
            await db.execute(
                insert(ToolCall).values(
                    session_id=sid, message_sequence=2, call_index=1, call_id="c1", name="read"
                )
            )


async def test_invalid_tool_message_is_refused(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    bad = NewMessage(role="tool", kind="normal", content=[{"type": "text", "text": "x"}])
    with pytest.raises(InvalidInput) as refused:
        await append(factory, sid, bad)
    assert refused.value.code == "invalid_tool_message"


async def test_unknown_session_is_not_found(factory: SessionFactory) -> None:
    with pytest.raises(NotFound) as missing:
        await append(factory, "ses-nope", user("x"))
    assert missing.value.code == "session_not_found"


async def test_rolled_back_transaction_leaves_no_row_and_no_consumed_sequence(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(factory, sid, user("kept"))

    async def append_then_fail() -> None:
        async with unit_of_work(factory) as db:
            await MessageRepository(db).append(sid, [user("lost"), assistant("c9")])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await append_then_fail()
    assert await sequences(factory, sid) == [1]
    async with unit_of_work(factory, read_only=True) as db:
        assert await MessageRepository(db).list_unresolved_tool_calls(sid) == []
        row = await db.get(AgentSession, sid)
        assert row is not None
        assert row.last_message_sequence == 1
    (next_one,) = await append(factory, sid, user("next"))
    assert next_one.sequence == 2


async def test_insert_if_absent_is_idempotent_by_message_id(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    ws = NewMessage(
        role="user",
        kind="world_state",
        content=[{"type": "text", "text": "<sandbox_policy>…</sandbox_policy>"}],
        message_id="world-state:t1:1:1:runtime/sandbox-policy",
        world_state_section="runtime/sandbox-policy",
        turn_id="t1",
    )
    async with unit_of_work(factory) as db:
        first = await MessageRepository(db).insert_if_absent(sid, ws)
    async with unit_of_work(factory) as db:
        again = await MessageRepository(db).insert_if_absent(sid, ws)
    assert first is not None
    assert first.sequence == 1
    assert again is None
    (after,) = await append(factory, sid, user("x"))
    assert after.sequence == 2  # the retry consumed nothing


async def test_page_load_after_boundary_and_helpers(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(factory, sid, *[user(f"m{i}") for i in range(1, 8)], assistant(text="done"))
    async with unit_of_work(factory, read_only=True) as db:
        repo = MessageRepository(db)
        page = await repo.page(sid, after_sequence=2, limit=3)
        assert [m.sequence for m in page.messages] == [3, 4, 5]
        assert page.has_more
        assert page.next_after_sequence == 5
        last = await repo.page(sid, after_sequence=3, limit=5, through_sequence=6)
        assert [m.sequence for m in last.messages] == [4, 5, 6]
        assert not last.has_more
        assert last.next_after_sequence is None
        tail = await repo.load(sid, after_sequence=6)
        assert [m.sequence for m in tail] == [7, 8]
        assert await repo.count(sid, after_sequence=2, through_sequence=6) == 4
        assert await repo.last_sequence(sid, role="assistant") == 8
        request = await repo.last_user_request(sid, through_sequence=5)
        assert request is not None
        assert request.sequence == 5
        by_id = await repo.get_by_message_id(sid, tail[0].message_id)
        assert by_id == tail[0]


async def test_concurrent_appenders_get_gap_free_unique_sequences(
    factory: SessionFactory, make_session: MakeSession, database_url: str
) -> None:
    sid = await make_session()
    tasks, per_task = 8, 25

    async def appender(n: int) -> None:
        for i in range(per_task):
            await append(factory, sid, user(f"task {n} message {i}"))

    await asyncio.gather(*(appender(n) for n in range(tasks)))
    assert await sequences(factory, sid) == list(range(1, tasks * per_task + 1))


async def test_loading_ten_thousand_messages_is_fast(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """Loading grows with the messages, no faster: 10 000 take about ten times 1 000, both
    measured in this run (so a loaded machine slows both alike), best of three each."""
    small, large = await make_session(), await make_session()
    batch = [user("x" * 200) if i % 2 else assistant(text="y" * 200) for i in range(1000)]
    await append(factory, small, *batch)
    for _ in range(10):
        await append(factory, large, *batch)

    async def best_load(sid: str) -> tuple[float, int]:
        times = []
        for _ in range(3):
            async with unit_of_work(factory, read_only=True) as db:
                started = time.perf_counter()
                loaded = await MessageRepository(db).load(sid)
                times.append(time.perf_counter() - started)
        return min(times), len(loaded)

    small_seconds, small_count = await best_load(small)
    large_seconds, large_count = await best_load(large)
    assert (small_count, large_count) == (1_000, 10_000)
    ratio = large_seconds / small_seconds
    assert ratio < 25, (
        f"1 000 messages load in {small_seconds:.3f}s, 10 000 in {large_seconds:.3f}s"
    )
    assert large_seconds < 10, f"loading 10 000 messages took {large_seconds:.3f}s"


async def test_messages_have_no_update_or_delete_api() -> None:
    public = {n for n in dir(MessageRepository) if not n.startswith("_")}
    assert not {n for n in public if n.startswith(("update", "delete", "replace", "remove"))}


async def test_select_of_row_counts_matches(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(factory, sid, assistant("a", "b"))
    async with unit_of_work(factory, read_only=True) as db:
        rows = (
            await db.execute(select(ToolCall.call_index).where(ToolCall.session_id == sid))
        ).all()
    assert sorted(r[0] for r in rows) == [0, 1]


async def test_a_tool_row_takes_the_name_of_the_call_it_answers(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(factory, sid, assistant("c1"))
    nameless = tool("c1")
    nameless.content[0]["name"] = ""  # type: ignore[typeddict-unknown-key]
    (row,) = await append(factory, sid, nameless)
    assert row.tool_call_id == "c1"
    assert row.tool_name == "read"
    async with unit_of_work(factory, read_only=True) as db:
        (reloaded,) = await MessageRepository(db).load(sid, after_sequence=1)
    assert reloaded.tool_name == "read"
    assert reloaded.content[0]["name"] == ""  # type: ignore[typeddict-item]
