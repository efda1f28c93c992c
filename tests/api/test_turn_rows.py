"""A waiting turn whose stored ``pending_tool_calls`` no version writes (a hand edit) is still
read, listed, cancelled and answered — and the session takes new turns after it. A dict there
used to make the turn's reads and its cancel answer 500 and leave the session busy for ever."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import Turn
from tests.api.helpers import new_session, run_turn, scripted_model

pytestmark = pytest.mark.anyio


async def waiting_turn(api: httpx.AsyncClient, pending: Any) -> tuple[str, str, str]:
    """A session whose turn waits for the result of ``read`` (call ``c1``), its stored entries
    then replaced by ``pending``: (session, turn, the call's id)."""
    script = [{"tool_calls": [{"id": "c1", "name": "read", "input": {"path": "a"}}]}]
    model_id = await scripted_model(api, [*script, {"text": "after"}, {"text": "next turn"}])
    sid = await new_session(api, model_id=model_id)
    turn = await run_turn(api, sid)
    assert turn["phase"] == "waiting_tool_results", turn
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:
        await db.execute(
            update(Turn).where(Turn.turn_id == turn["turn_id"]).values(pending_tool_calls=pending)
        )
    return sid, turn["turn_id"], "c1"


BROKEN = [
    pytest.param({"c1": {"name": "read"}}, id="an-object"),
    pytest.param(["c1"], id="a-list-of-strings"),
    pytest.param([{"tool_call_id": 5, "name": "read", "input": {}}], id="a-numeric-id"),
    pytest.param([{"tool_call_id": "c1", "name": "read"}], id="no-input"),
]


@pytest.mark.parametrize("pending", BROKEN)
async def test_it_reads_and_cancels_and_the_session_goes_on(
    api: httpx.AsyncClient, pending: Any
) -> None:
    sid, turn_id, _ = await waiting_turn(api, pending)

    read = await api.get(f"/v1/sessions/{sid}/turns/{turn_id}")
    assert read.status_code == 200, read.text
    assert read.json()["pending_tool_calls"] == []  # none that could be answered
    listed = await api.get(f"/v1/sessions/{sid}/turns")
    assert listed.status_code == 200, listed.text
    assert [t["turn_id"] for t in listed.json()["turns"]] == [turn_id]

    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{turn_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert (await run_turn(api, sid))["outcome"] == {"final_text": "after"}


@pytest.mark.parametrize("pending", BROKEN)
async def test_a_result_for_a_call_it_cannot_read_is_refused_plainly(
    api: httpx.AsyncClient, pending: Any
) -> None:
    sid, turn_id, call_id = await waiting_turn(api, pending)

    output = [{"type": "text", "text": "file body"}]
    result = {"tool_call_id": call_id, "state": "success", "output": output}
    answered = await api.post(
        f"/v1/sessions/{sid}/turns/{turn_id}/tool-results", json={"results": [result]}
    )

    assert answered.status_code == 422, answered.text
    assert answered.json()["code"] == "unknown_tool_call"
    assert (await api.get(f"/v1/sessions/{sid}/turns/{turn_id}")).json()["status"] == "running"
