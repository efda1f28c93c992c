"""A real server process ends a turn whose caller never posts its tool results,
on both engines: nobody touches the turn after it starts waiting, the process's sweeper ends it
at the session's short deadline (``failed``, ``tool_results_timeout``), the unanswered call gets
the fixed not-executed result, and the session takes the next turn. The test waits on the live
updates (the ``turn_finished`` event), never a fixed time."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from app.services.turns.calls import NOT_EXECUTED_TEXT
from app.storage.migrate import upgrade_to_head
from tests.api.helpers import new_session, run_turn, scripted_model
from tests.api.test_turns import agent, call, history, results_of
from tests.conftest import BACKENDS, throwaway_postgres_database
from tests.multiprocess.servers import read_events
from tests.ops.test_observability import samples, value
from tests.servers import ServerProcess, one_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Short, yet far longer than the start's answer takes on a busy machine (the answer has to show
# the turn still waiting).
TIMEOUT = 2


@pytest.fixture(params=BACKENDS)
def own_database_url(request: pytest.FixtureRequest, sqlite_url: str) -> Iterator[str]:
    """A database of this test alone: the sweeper ends every overdue turn it finds, and the
    run's shared PostgreSQL database holds other tests' waiting turns (it counted one of them
    too, 2 instead of 1)."""
    if request.param == "sqlite":
        yield sqlite_url
        return
    with throwaway_postgres_database() as url:
        asyncio.run(upgrade_to_head(url))
        yield url


@pytest.fixture
def server(own_database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    settings = {"turn_reaper_interval_seconds": "0.2", "events_poll_seconds": "0.1"}
    with one_server(own_database_url, tmp_path, **settings) as process:
        yield process


async def test_the_sweeper_ends_a_turn_nobody_answers(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as api:
        model_id = await scripted_model(
            api, [{"tool_calls": [call("read", path="a.py")]}, {"text": "fresh start"}]
        )
        waits = agent(tool_results_timeout_seconds=TIMEOUT)
        sid = await new_session(api, model_id=model_id, agent=waits)
        turn = await run_turn(api, sid)
        assert turn["phase"] == "waiting_tool_results", turn
        assert 0 < turn["tool_results_remaining_seconds"] <= TIMEOUT
        (pending,) = turn["pending_tool_calls"]

        # Only the live updates are read until the turn ends: nothing touches the turn.
        with anyio.fail_after(60):
            events = await read_events(api, f"/v1/sessions/{sid}/events", until="turn_finished")
        finished = events[-1]
        assert (finished.event, finished.data["turn_id"]) == ("turn_finished", turn["turn_id"])
        assert finished.data["payload"]["status"] == "failed"
        assert finished.data["payload"]["outcome"]["code"] == "tool_results_timeout"
        not_run = [
            e.data["payload"]
            for e in events
            if e.event == "tool_call_finished" and e.data["payload"]["state"] == "interrupted"
        ]
        assert [p["tool_call_id"] for p in not_run] == [pending["tool_call_id"]]

        ended = (await api.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")).json()
        assert (ended["status"], ended["outcome"]["code"]) == ("failed", "tool_results_timeout")
        # Counted like any turn that ended, by its code (this process has ended no other).
        found = samples((await api.get("/metrics")).text)
        labels = {"status": "failed", "code": "tool_results_timeout"}
        assert value(found, "ctxsvc_turns_finished_total", **labels) == 1
        (result,) = results_of(await history(api, sid))
        assert (result["id"], result["output"][0]["text"]) == (
            pending["tool_call_id"],
            NOT_EXECUTED_TEXT,
        )
        following = await run_turn(api, sid, f"again {uuid.uuid4().hex}")
        assert (following["status"], following["outcome"]) == (
            "completed",
            {"final_text": "fresh start"},
        )
