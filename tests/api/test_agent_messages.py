"""Agent messages (spec §6): queued durably, never start a turn, drained before a model call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.core.content import text_block
from app.services.turns import agent_message_text
from tests.api.helpers import run_turn
from tests.api.test_turns import history, session_with

pytestmark = pytest.mark.anyio


async def deliver(api: httpx.AsyncClient, sid: str, **body: object) -> httpx.Response:
    payload: dict[str, object] = {"task": "explore-1", "kind": "final_answer", "body": "Found it."}
    payload.update(body)
    return await api.post(f"/v1/sessions/{sid}/agent-messages", json=payload)


async def test_queued_message_is_drained_before_the_next_model_call(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_with(api, [{"text": "thanks"}])
    queued = await deliver(api, sid)
    assert queued.status_code == 202, queued.text
    assert queued.json()["status"] == "queued"
    # Never starts a turn, and is not in the conversation yet.
    assert await history(api, sid) == []
    turn = await run_turn(api, sid, "what did the explorer find?")
    assert turn["status"] == "completed"
    messages = await history(api, sid)
    assert [(m["role"], m["kind"]) for m in messages] == [
        ("user", "normal"),
        ("user", "agent_message"),
        ("assistant", "normal"),
    ]
    assert messages[1]["content"][0]["text"] == (
        "<agent_message>\n<task>explore-1</task>\n<kind>final_answer</kind>\n<body>\n"
        "Found it.\n</body>\n</agent_message>"
    )


def backwards_clock() -> Iterator[datetime]:
    """Each reading a minute before the last: replicas whose clocks disagree."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    while True:
        yield now
        now -= timedelta(minutes=1)


async def test_messages_drain_in_the_order_queued_whatever_the_clocks_say(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await session_with(api, [{"text": "thanks"}])
    clock = backwards_clock()
    monkeypatch.setattr("app.storage.repositories.state.utc_now", lambda: next(clock))
    # Ids sort the other way too: neither the clock nor the id may decide the order.
    for message_id, body in (("am-z", "first"), ("am-m", "second"), ("am-a", "third")):
        queued = await deliver(api, sid, agent_message_id=message_id, body=body)
        assert queued.status_code == 202, queued.text
    monkeypatch.undo()
    await run_turn(api, sid, "what came back?")
    bodies = [
        m["content"][0]["text"].split("<body>\n")[1].split("\n</body>")[0]
        for m in await history(api, sid)
        if m["kind"] == "agent_message"
    ]
    assert bodies == ["first", "second", "third"]


async def test_concurrent_deliveries_are_all_queued_once(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [{"text": "ok"}])
    answers = await asyncio.gather(
        *(deliver(api, sid, agent_message_id=f"am-{i}", body=f"b{i}") for i in range(12))
    )
    assert [a.status_code for a in answers] == [202] * 12, [a.text for a in answers]
    await run_turn(api, sid)
    delivered = [m for m in await history(api, sid) if m["kind"] == "agent_message"]
    assert len(delivered) == 12


async def test_retried_delivery_is_queued_once(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [{"text": "ok"}])
    first = await deliver(api, sid, agent_message_id="am-1")
    again = await deliver(api, sid, agent_message_id="am-1")
    assert first.json()["duplicate"] is False
    assert again.json()["duplicate"] is True
    await run_turn(api, sid)
    assert [m["kind"] for m in await history(api, sid)].count("agent_message") == 1


async def test_message_at_the_cap_is_refused(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [])
    # Bytes of the content JSON with an empty body; each body character adds one byte.
    base = len(
        json.dumps(
            [text_block(agent_message_text("explore-1", "failed", ""))],
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
    )
    overhead = base
    under = await deliver(api, sid, kind="failed", body="x" * (3999 * 4 - overhead))
    assert under.status_code == 202, under.text
    assert under.json()["tokens"] == 3999
    at_cap = await deliver(api, sid, kind="failed", body="x" * (3999 * 4 - overhead + 1))
    assert at_cap.status_code == 422
    assert at_cap.json()["code"] == "agent_message_too_large"
    assert at_cap.json()["cap"] == 4000


async def test_bad_kind_and_unknown_session(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [])
    assert (await deliver(api, sid, kind="done")).status_code == 422
    missing = await deliver(api, "no-such-session")
    assert missing.status_code == 404
    assert missing.json()["code"] == "session_not_found"
