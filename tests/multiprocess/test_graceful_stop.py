"""Stopping a replica while it runs a turn, with real server processes.

SIGTERM is a graceful stop: the turn the replica runs (its model call held open by a loopback
fake) is recorded ``interrupted`` with its lease released before the process exits, the
requests waiting on it are answered, and another replica starts the session's next turn at once
— the leases here last two minutes, so only the graceful stop can free the session in time.
SIGKILL leaves the turn to its lease, as before. Both engines: SQLite shared by two processes
on one host, PostgreSQL behind two replicas.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from app.storage.database import create_engine, create_session_factory, unit_of_work
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import fake_provider_model, new_session, scripted_model
from tests.api.test_turns import agent
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"
EXIT_DEADLINE_SECONDS = 30.0


def replica_env(database_url: str, lease_seconds: float) -> dict[str, str]:
    return clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="true",
        CTXSVC_LOG_LEVEL="INFO",
        CTXSVC_TURN_LEASE_SECONDS=str(lease_seconds),
        CTXSVC_TURN_WATCH_INTERVAL_SECONDS="0.2",
        CTXSVC_TURN_REAPER_INTERVAL_SECONDS=str(min(lease_seconds, 120.0)),
        CTXSVC_EVENTS_POLL_SECONDS="0.1",
        **{KEY_ENV: "sk-test"},
    )


@pytest.fixture
def holding_provider() -> Iterator[FakeProviderServer]:
    """Holds every model call open for a minute (it never answers within a test)."""
    with FakeProviderServer(latency=60.0) as server:
        yield server


def pair(database_url: str, tmp_path: Path, lease_seconds: float) -> Any:
    commands = [uvicorn_command(free_port()) for _ in range(2)]
    return running(commands, env=replica_env(database_url, lease_seconds), cwd=tmp_path)


async def held_turn(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> tuple[str, dict[str, Any]]:
    """A session on a model behind ``provider``; the start body of a turn for it."""
    model_id = await fake_provider_model(api, provider.base_url, key_env=KEY_ENV)
    provider.enqueue(StreamReply(openai_stream(text=["never delivered"])))
    sid = await new_session(api, model_id=model_id, agent=agent())
    return sid, {"client_request_id": "held", "input": [{"type": "text", "text": "go"}]}


async def stream_until_closed(
    api: httpx.AsyncClient, url: str, connected: asyncio.Event
) -> list[dict[str, Any]]:
    """Every event of one SSE connection, until the server ends it."""
    events: list[dict[str, Any]] = []
    async with api.stream("GET", url) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith(": connected"):
                connected.set()
            elif line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    return events


def exit_code(server: ServerProcess, signal_it: str) -> int:
    process = server.process
    assert process is not None
    getattr(process, signal_it)()  # terminate (SIGTERM) or kill (SIGKILL)
    return process.wait(EXIT_DEADLINE_SECONDS)


async def stored_turn(database_url: str, sid: str, tid: str) -> Any:
    engine = create_engine(database_url)
    try:
        async with unit_of_work(create_session_factory(engine), read_only=True) as db:
            return await TurnRepository(db).get(sid, tid)
    finally:
        await engine.dispose()


async def next_turn_starts_at_once(api: httpx.AsyncClient, sid: str) -> None:
    scripted = await scripted_model(api, [{"text": "fresh start"}])
    assert (await api.patch(f"/v1/sessions/{sid}", json={"model_id": scripted})).status_code == 200
    fresh = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "after", "input": [{"type": "text", "text": "again"}]},
    )
    assert fresh.status_code == 202, fresh.text  # not 409 busy: the session is free
    assert fresh.json()["status"] == "completed"


async def test_sigterm_interrupts_the_turn_answers_its_waiters_and_frees_the_session(
    database_url: str, tmp_path: Path, holding_provider: FakeProviderServer
) -> None:
    with pair(database_url, tmp_path, lease_seconds=120.0) as (stopped, survivor):
        async with (
            httpx.AsyncClient(base_url=stopped.url, timeout=60) as a,
            httpx.AsyncClient(base_url=survivor.url, timeout=60) as b,
        ):
            sid, body = await held_turn(a, holding_provider)
            # A caller waiting for the turn, and a live event stream, both on the stopped one.
            start = asyncio.ensure_future(
                a.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
            )
            connected = asyncio.Event()
            stream = asyncio.ensure_future(
                stream_until_closed(a, f"/v1/sessions/{sid}/events", connected)
            )
            await holding_provider.arrived()  # the model call is open: the start is waiting
            with anyio.fail_after(30):
                await connected.wait()
            started = time.monotonic()
            assert await asyncio.to_thread(exit_code, stopped, "terminate") in (0, -15)
            assert time.monotonic() - started < EXIT_DEADLINE_SECONDS

            answered = await start
            assert answered.status_code == 202, answered.text
            turn = answered.json()
            assert (turn["status"], turn["phase"]) == ("interrupted", "terminal")
            assert turn["outcome"]["code"] == "process_restart"
            events = await stream  # it ended: the server closed it, having sent the outcome
            assert events[-1]["type"] == "turn_finished"
            assert events[-1]["payload"]["status"] == "interrupted"

            row = await stored_turn(database_url, sid, turn["turn_id"])
            assert (row.status, row.lease_owner, row.lease_expires_at) == (
                "interrupted",
                None,
                None,
            )
            seen = (await b.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")).json()
            assert (seen["status"], seen["phase"]) == ("interrupted", "terminal")
            await next_turn_starts_at_once(b, sid)
    log = stopped.log()
    assert "interrupted: this process is stopping" in log
    assert "Traceback" not in log


async def test_sigkill_leaves_the_turn_to_its_lease(
    database_url: str, tmp_path: Path, holding_provider: FakeProviderServer
) -> None:
    with pair(database_url, tmp_path, lease_seconds=1.0) as (killed, survivor):
        async with (
            httpx.AsyncClient(base_url=killed.url, timeout=60) as a,
            httpx.AsyncClient(base_url=survivor.url, timeout=60) as b,
        ):
            sid, body = await held_turn(a, holding_provider)
            tid = (await a.post(f"/v1/sessions/{sid}/turns", json=body)).json()["turn_id"]
            await holding_provider.arrived()
            assert await asyncio.to_thread(exit_code, killed, "kill") == -9
            # Nothing was written by the killed process: the lease runs out, then the survivor
            # interrupts the turn (when it sweeps, or when the turn is read).
            with anyio.fail_after(30):
                while True:
                    turn = (await b.get(f"/v1/sessions/{sid}/turns/{tid}")).json()
                    if turn["status"] != "running":
                        break
                    await asyncio.sleep(0.1)
            assert (turn["status"], turn["phase"]) == ("interrupted", "terminal")
            assert turn["outcome"]["code"] == "process_restart"
            await next_turn_starts_at_once(b, sid)
