"""A tool round's step commits while the next model call is sent (``app.services.turns.overlap``):
the provider gets the next request without waiting for the commit, and everything a user sees
is as if the step had committed first — a live listener gets the step's updates before any
delta of the next call; a step the database refuses, a cancel recorded elsewhere and a turn lost
meanwhile all end the turn as before, the call already sent abandoned.

Real HTTP on loopback to the fake provider (the adapter says when a request is written; a
wrapper that keeps saying so changes the database as another replica would)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.storage.database import unit_of_work
from app.storage.repositories import TurnRepository
from tests.api.helpers import fake_provider_model, new_session, run_turn, stored
from tests.api.test_turn_bookkeeping import execute, own_database  # noqa: F401 (fixture)
from tests.conftest import make_settings
from tests.multiprocess.servers import read_events, serve_in_process
from tests.providers.fakes import FakeProviderServer, FakeToolCall, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"
# The next call's answer never comes while the test runs: the turn ends without it.
NEVER = 3600.0


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeProviderServer() as server:
        yield server


def plan_round(step: str = "read the logs") -> StreamReply:
    arguments = json.dumps({"plan": [{"step": step, "status": "in_progress"}]})
    call = FakeToolCall("call-plan-1", "update_plan", [arguments])
    return StreamReply(openai_stream(tool_calls=[call], finish_reason="tool_calls"))


@pytest.fixture
async def app_api(own_database: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:  # noqa: F811
    app = create_app(make_settings(own_database))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            yield app, api


class AfterFirstAnswer:
    """A model client that, once its first answer is in, does ``then`` to the database (as
    another replica would, before this runner's step commits); it says when a request is
    written, like the adapter it wraps."""

    def __init__(self, inner: Any, app: FastAPI, session_id: str, then: Any) -> None:
        self._inner = inner
        self._app = app
        self._session_id = session_id
        self._then = then
        self._answered = 0
        self.signals_sent: bool = inner.signals_sent

    async def complete(self, request: dict[str, Any], **options: Any) -> Any:
        response = await self._inner.complete(request, **options)
        self._answered += 1
        if self._answered == 1:
            db = self._app.state.container.db
            # The turn's start commits while its first call is sent (``overlap``): another
            # replica sees the turn once that is done.
            with anyio.fail_after(30):
                while True:
                    async with unit_of_work(db) as read:
                        running = await TurnRepository(read).get_running(self._session_id)
                    if running is not None:
                        break
                    await anyio.sleep(0.01)
            async with unit_of_work(db) as write:
                await self._then(TurnRepository(write), running.turn_id)
        return response


async def roles(api: httpx.AsyncClient, session_id: str) -> list[str]:
    """The roles of the stored messages but World State's."""
    return [m["role"] for m in await stored(api, session_id) if m["kind"] != "world_state"]


def wrap_clients(app: FastAPI, session_id: str, then: Any) -> None:
    clients = app.state.container.model_clients
    for_model = clients.for_model
    clients.for_model = lambda entry, **kw: AfterFirstAnswer(
        for_model(entry, **kw), app, session_id, then
    )


async def test_deltas_of_the_next_call_come_after_the_step_s_updates_live(
    database_url: str, provider: FakeProviderServer
) -> None:
    settings = make_settings(database_url, events_poll_seconds=0.1)
    async with (
        serve_in_process(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as live,
    ):
        model = await fake_provider_model(live, provider.base_url, "openai_chat")
        sid = await new_session(live, model_id=model)
        provider.enqueue(plan_round(), StreamReply(openai_stream(text=["all ", "done"])))
        heard: list[Any] = []
        connected = anyio.Event()

        async def listen() -> None:
            url = f"/v1/sessions/{sid}/events"
            heard.extend(await read_events(live, url, on_comment=lambda _: connected.set()))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(listen)
                await connected.wait()  # subscribed: only then does the turn run
                await run_turn(live, sid)
    order = [e.event for e in heard]
    assert order.count("text_delta") == 2, order
    first_delta = order.index("text_delta")
    # Everything the tool round's step wrote came before the next call's first delta.
    for update in ("plan_updated", "tool_call_finished", "model_call_finished"):
        assert order.index(update) < first_delta, order
    assert order[-1] == "turn_finished"


async def test_a_round_the_database_refuses_at_commit_fails_the_turn_and_abandons_the_call(
    own_database: str,  # noqa: F811
    provider: FakeProviderServer,
) -> None:
    backend = "postgresql" if own_database.startswith("postgresql") else "sqlite"
    await execute(own_database, *REFUSING_RESULTS[backend])
    app = create_app(make_settings(own_database))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            sid = await new_session(
                api, model_id=await fake_provider_model(api, provider.base_url, "openai_chat")
            )
            provider.enqueue(
                plan_round(), StreamReply(openai_stream(text=["late"]), first_byte_delay=NEVER)
            )
            with anyio.fail_after(60):
                turn = await run_turn(api, sid)
            assert (turn["status"], turn["outcome"]["code"]) == ("failed", "persistence_error")
            # The next request went out before the commit; its answer was not waited for.
            assert len(await provider.arrived(2)) == 2
            # Nothing of the round is stored: not the answer, not its result.
            assert await roles(api, sid) == ["user"]


REFUSING_RESULTS: dict[str, tuple[str, ...]] = {
    "sqlite": (
        "CREATE TRIGGER refuse_results BEFORE INSERT ON messages WHEN NEW.role = 'tool' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END",
    ),
    "postgresql": (
        "CREATE FUNCTION refuse_results() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'refused by the test trigger'; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_results BEFORE INSERT ON messages FOR EACH ROW "
        "WHEN (NEW.role = 'tool') EXECUTE FUNCTION refuse_results()",
    ),
}


async def test_a_cancel_recorded_elsewhere_found_at_commit_abandons_the_call_sent(
    app_api: tuple[FastAPI, httpx.AsyncClient], provider: FakeProviderServer
) -> None:
    app, api = app_api
    sid = await new_session(
        api, model_id=await fake_provider_model(api, provider.base_url, "openai_chat")
    )

    async def cancel_elsewhere(turns: TurnRepository, turn_id: str) -> None:
        assert await turns.request_cancel(sid, turn_id)

    wrap_clients(app, sid, cancel_elsewhere)
    provider.enqueue(
        plan_round(), StreamReply(openai_stream(text=["late"]), first_byte_delay=NEVER)
    )
    with anyio.fail_after(60):
        turn = await run_turn(api, sid)
    assert (turn["status"], turn["phase"]) == ("cancelled", "terminal"), turn
    assert len(await provider.arrived(2)) == 2
    # The round's step committed (the answer and its result are stored); the call sent after
    # it was abandoned: no answer of it.
    assert await roles(api, sid) == ["user", "assistant", "tool"]
    assert (await stored(api, sid))[-1]["content"][0]["state"] == "success"


async def test_a_turn_lost_meanwhile_keeps_nothing_of_the_round_and_abandons_the_call(
    app_api: tuple[FastAPI, httpx.AsyncClient], provider: FakeProviderServer
) -> None:
    app, api = app_api
    sid = await new_session(
        api, model_id=await fake_provider_model(api, provider.base_url, "openai_chat")
    )

    async def interrupted_elsewhere(turns: TurnRepository, turn_id: str) -> None:
        # The reaper of another replica ended the turn (its lease lapsed, say).
        assert await turns.finish(
            sid, turn_id, status="interrupted", outcome={"code": "process_restart"}
        )

    wrap_clients(app, sid, interrupted_elsewhere)
    provider.enqueue(
        plan_round(), StreamReply(openai_stream(text=["late"]), first_byte_delay=NEVER)
    )
    start = await api.post(
        f"/v1/sessions/{sid}/turns",
        json={"client_request_id": "lost", "input": [{"type": "text", "text": "go"}]},
    )
    assert start.status_code == 202, start.text
    turn_id = start.json()["turn_id"]
    assert len(await provider.arrived(2)) == 2
    # The runner ends once its step's commit found the turn lost.
    runners = [task for _, task in app.state.container.turns._runners.values()]
    if runners:
        with anyio.fail_after(60):
            await asyncio.wait(runners)
    turn = (await api.get(f"/v1/sessions/{sid}/turns/{turn_id}")).json()
    assert turn["status"] == "interrupted", turn
    assert await roles(api, sid) == ["user"]


REFUSING_STARTS: dict[str, tuple[str, ...]] = {
    "sqlite": (
        "CREATE TRIGGER refuse_starts BEFORE INSERT ON session_events "
        "WHEN NEW.type = 'turn_started' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END",
    ),
    "postgresql": (
        "CREATE FUNCTION refuse_starts() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'refused by the test trigger'; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_starts BEFORE INSERT ON session_events FOR EACH ROW "
        "WHEN (NEW.type = 'turn_started') EXECUTE FUNCTION refuse_starts()",
    ),
}


async def test_a_start_the_database_refuses_while_its_first_call_is_sent_stores_no_turn(
    own_database: str,  # noqa: F811
    provider: FakeProviderServer,
) -> None:
    # The start commits as its first call goes out: refused then, the request fails as a
    # start that could not be stored always did, and the call already sent is abandoned.
    backend = "postgresql" if own_database.startswith("postgresql") else "sqlite"
    app = create_app(make_settings(own_database))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            sid = await new_session(
                api, model_id=await fake_provider_model(api, provider.base_url, "openai_chat")
            )
            # A first turn: the connection to the provider is open (a start whose call must
            # open one first commits at once).
            provider.enqueue(StreamReply(openai_stream(text=["fine"])))
            assert (await run_turn(api, sid))["status"] == "completed"
            await execute(own_database, *REFUSING_STARTS[backend])
            provider.enqueue(StreamReply(openai_stream(text=["late"]), first_byte_delay=NEVER))
            with anyio.fail_after(60):
                refused = await api.post(
                    f"/v1/sessions/{sid}/turns",
                    json={"client_request_id": "r2", "input": [{"type": "text", "text": "go"}]},
                )
            assert refused.status_code == 500, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert "refused by the test trigger" not in refused.text
            turns = (await api.get(f"/v1/sessions/{sid}/turns")).json()["turns"]
            assert [t["client_request_id"] for t in turns] == [turns[0]["client_request_id"]]
            assert turns[0]["status"] == "completed"
            assert await roles(api, sid) == ["user", "assistant"]
            await app.state.container.turns.idle()
