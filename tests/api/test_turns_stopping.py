"""A replica that stops takes no more turn work and hands what it can to another:
its running turns are interrupted, a turn waiting for tool results is left waiting,
and starts or tool results that arrive meanwhile are refused before anything is written, so the
caller's retry reaches a replica that takes them. (The stop signal itself, with real processes:
``tests/multiprocess/test_graceful_stop.py``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from app.main import create_app
from app.storage.base import utc_now
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import new_session, run_turn, scripted_model
from tests.api.test_turns import agent, call, ok, post_results
from tests.api.test_turns_control import provider_model, start_body
from tests.conftest import make_settings
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

Replica = tuple[FastAPI, httpx.AsyncClient]


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    with FakeProviderServer(latency=60.0) as server:
        yield server


@pytest.fixture
async def replicas(database_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two apps on one database; leases of two minutes, so nothing here is lease expiry."""
    async with AsyncExitStack() as stack:
        pair: list[Replica] = []
        for _ in range(2):
            app = create_app(make_settings(database_url, turn_lease_seconds=120.0))
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            pair.append((app, await stack.enter_async_context(client)))
        yield pair[0], pair[1]


async def turns_of(app: FastAPI, sid: str) -> list[Any]:
    async with unit_of_work(app.state.container.db, read_only=True) as db:
        return list(await TurnRepository(db).list_for_session(sid))


def refused_while_stopping(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "shutting_down"
    assert response.headers["retry-after"] == "1"


async def test_stopping_interrupts_running_turns_and_refuses_new_work(
    replicas: tuple[Replica, Replica],
    provider: FakeProviderServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (app, a), (_, b) = replicas
    provider.enqueue(StreamReply(openai_stream(text=["never delivered"])))
    sid = await new_session(a, model_id=await provider_model(a, provider), agent=agent())
    tid = (await a.post(f"/v1/sessions/{sid}/turns", json=start_body())).json()["turn_id"]
    await provider.arrived()  # its model call is open

    await app.state.container.turns.drain()
    turn = (await b.get(f"/v1/sessions/{sid}/turns/{tid}")).json()
    assert (turn["status"], turn["phase"]) == ("interrupted", "terminal")
    # Its end is logged as any turn's (the line operators alert on).
    (finished,) = [r for r in caplog.records if r.getMessage() == "turn finished"]
    assert finished.levelname == "WARNING"
    assert turn["outcome"] == {
        "code": "process_restart",
        "message": "process restarted before turn completed",
    }
    refused_while_stopping(await a.post(f"/v1/sessions/{sid}/turns", json=start_body("late")))
    assert [t.turn_id for t in await turns_of(app, sid)] == [tid]  # nothing was written
    # The same request, sent again to the other replica, starts the turn there.
    scripted = await scripted_model(b, [{"text": "taken over"}])
    assert (await b.patch(f"/v1/sessions/{sid}", json={"model_id": scripted})).status_code == 200
    again = await b.post(
        f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=start_body("late")
    )
    assert (again.status_code, again.json()["status"]) == (202, "completed")


async def test_a_turn_waiting_for_tool_results_is_handed_to_another_replica(
    replicas: tuple[Replica, Replica],
) -> None:
    (app, a), (_, b) = replicas
    model_id = await scripted_model(a, [{"tool_calls": [call("read", path="a")]}, {"text": "ok"}])
    sid = await new_session(a, model_id=model_id, agent=agent())
    turn = await run_turn(a, sid)
    assert turn["phase"] == "waiting_tool_results"
    (pending,) = turn["pending_tool_calls"]

    await app.state.container.turns.drain()
    # No process works on a waiting turn: stopping leaves it waiting.
    still = (await b.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")).json()
    assert (still["status"], still["phase"]) == ("running", "waiting_tool_results")
    result = ok(pending["tool_call_id"])
    refused_while_stopping(await post_results(a, sid, turn["turn_id"], result, wait=True))
    (row,) = await turns_of(app, sid)
    assert [c["result"] for c in row.pending_tool_calls] == [None]  # nothing was recorded
    done = await post_results(b, sid, turn["turn_id"], result, wait=True)
    assert (done.status_code, done.json()["status"]) == (200, "completed"), done.text


async def test_a_terminal_turn_reads_as_terminal_whatever_its_row_says(
    replicas: tuple[Replica, Replica],
) -> None:
    """A row an older version interrupted kept its last phase (``running_model``): it reads as
    terminal, as every terminal turn does."""
    (app, a), _ = replicas
    model_id = await scripted_model(a, [{"tool_calls": [call("read", path="a")]}])
    sid = await new_session(a, model_id=model_id, agent=agent())
    turn = await run_turn(a, sid)
    async with unit_of_work(app.state.container.db) as db:
        await db.execute(
            update(Turn)
            .where(Turn.session_id == sid, Turn.turn_id == turn["turn_id"])
            .values(
                status="interrupted",
                phase="running_model",
                finished_at=utc_now(),
                pending_tool_calls=[],
            )
        )
    read = (await a.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")).json()
    assert (read["status"], read["phase"]) == ("interrupted", "terminal")
