"""A session whose stored sequence counters fell behind its rows (a partial restore, a hand edit)
refuses its writes with 409 ``sequence_conflict`` naming the repair, stores nothing, and is
repaired by ``POST …/reload`` — before, every append, session prepare and turn start of it
answered 500 for ever."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import AgentSession
from tests.api.helpers import new_session, run_turn, scripted_model

pytestmark = pytest.mark.anyio


def exchange(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"step {i}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]},
    ]


@pytest.mark.parametrize("counter", ["last_message_sequence", "last_event_sequence"])
async def test_writes_say_how_to_repair_and_reload_repairs(
    api: httpx.AsyncClient, counter: str
) -> None:
    model_id = await scripted_model(api, [{"text": "answered"}])
    sid = await new_session(api, model_id=model_id)
    for i in range(3):
        appended = await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(i)})
        assert appended.status_code == 201, appended.text
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:
        await db.execute(update(AgentSession).where(AgentSession.id == sid).values({counter: 1}))
    before = (await api.get(f"/v1/sessions/{sid}/messages")).json()

    for refused in (
        await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(3)}),
        await api.post(f"/v1/sessions/{sid}/prepare", json={}),
        await api.post(
            f"/v1/sessions/{sid}/turns",
            json={"client_request_id": "r1", "input": [{"type": "text", "text": "go"}]},
        ),
    ):
        assert refused.status_code == 409, refused.text
        problem = refused.json()
        assert problem["code"] == "sequence_conflict"
        assert "POST /v1/sessions/{session_id}/reload" in problem["detail"]
    assert (await api.get(f"/v1/sessions/{sid}/messages")).json() == before  # nothing stored
    assert (await api.get(f"/v1/sessions/{sid}/turns")).json()["turns"] == []

    reloaded = await api.post(f"/v1/sessions/{sid}/reload")
    assert reloaded.status_code == 200, reloaded.text

    appended = await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(3)})
    assert appended.status_code == 201, appended.text
    sequences = [
        m["sequence"] for m in (await api.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    ]
    assert sequences == list(range(1, 9))
    assert (await run_turn(api, sid))["outcome"] == {"final_text": "answered"}


async def test_reload_never_lowers_the_counters(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(0)})
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:  # ahead of the rows: a gap, harmless
        await db.execute(
            update(AgentSession).where(AgentSession.id == sid).values(last_message_sequence=10)
        )

    assert (await api.post(f"/v1/sessions/{sid}/reload")).status_code == 200

    await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(1)})
    listed = (await api.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [m["sequence"] for m in listed] == [1, 2, 11, 12]
