"""Live updates over Server-Sent Events (spec §6): ids, replay after Last-Event-ID, deltas,
heartbeats. Streams need a real HTTP server: httpx's ASGI transport buffers whole bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from app.main import create_app
from app.storage.database import unit_of_work
from tests.api.helpers import run_turn
from tests.api.test_turns import call, ok, post_results, session_with
from tests.conftest import make_settings
from tests.multiprocess.servers import read_events, serve_in_process

pytestmark = pytest.mark.anyio


@pytest.fixture
async def live(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(database_url, events_poll_seconds=0.1, events_heartbeat_seconds=0.2)
    async with (
        serve_in_process(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def test_updates_replay_in_order_with_ids_and_resume_after_last_event_id(
    live: httpx.AsyncClient,
) -> None:
    sid = await session_with(
        live,
        [{"tool_calls": [call("read", path="a"), call("update_plan", plan=[])]}, {"text": "ok"}],
    )
    turn = await run_turn(live, sid)
    (pending,) = turn["pending_tool_calls"]
    await post_results(live, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    url = f"/v1/sessions/{sid}/events"
    with anyio.fail_after(10):
        events = await read_events(live, url)
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    types = [e.event for e in events]
    assert types[0] == "turn_started"
    assert types[-1] == "turn_finished"
    for name in (
        "phase_changed",
        "tool_call_started",
        "tool_call_finished",
        "plan_updated",
        "draft_cleared",
    ):
        assert name in types
    assert events[-1].data["payload"] == {"status": "completed", "outcome": {"final_text": "ok"}}
    assert all(e.data["turn_id"] == turn["turn_id"] for e in events)
    # Reconnect after the 4th update: exactly the rest, in order; ?after= works the same.
    with anyio.fail_after(10):
        rest = await read_events(live, url, headers={"Last-Event-ID": "4"})
        same = await read_events(live, url, params={"after": 4})
    assert [e.id for e in rest] == [e.id for e in events[4:]]
    assert [e.data for e in rest] == [e.data for e in events[4:]]
    assert [e.id for e in same] == [e.id for e in rest]


class Heard(list[str]):
    """Comment lines of a stream; ``heartbeat`` is set when the first heartbeat arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.heartbeat = anyio.Event()

    def append(self, line: str) -> None:
        super().append(line)
        if line == ": heartbeat":
            self.heartbeat.set()


async def test_live_deltas_and_heartbeats_reach_a_connected_client(
    live: httpx.AsyncClient,
) -> None:
    sid = await session_with(live, [{"text": "streamed answer"}])
    comments = Heard()
    received: list[object] = []

    async def listen() -> None:
        received.extend(await read_events(live, f"/v1/sessions/{sid}/events", comments=comments))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(listen)
            # Connected and idle once a heartbeat arrives (a fixed pause lost the deltas when
            # the machine was too busy to connect in time): only then does the turn run.
            await comments.heartbeat.wait()
            await run_turn(live, sid)
    deltas = [e for e in received if e.id is None]  # type: ignore[attr-defined]
    assert [d.event for d in deltas] == ["text_delta"]  # type: ignore[attr-defined]
    assert deltas[0].data["payload"] == {"text": "streamed answer"}  # type: ignore[attr-defined]
    assert ": heartbeat" in comments


async def test_unknown_session_and_bad_last_event_id(live: httpx.AsyncClient) -> None:
    missing = await live.get("/v1/sessions/nope/events")
    assert missing.status_code == 404
    assert missing.json()["code"] == "session_not_found"
    sid = await session_with(live, [])
    bad = await live.get(f"/v1/sessions/{sid}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 422
    assert bad.json()["code"] == "invalid_last_event_id"


async def test_an_id_past_the_64_bit_range_is_refused_before_the_stream_starts(
    live: httpx.AsyncClient,
) -> None:
    sid = await session_with(live, [])
    url = f"/v1/sessions/{sid}/events"
    for big in (2**63, 10**20):
        header = await live.get(url, headers={"Last-Event-ID": str(big)})
        assert (header.status_code, header.json()["code"]) == (422, "invalid_last_event_id")
        query = await live.get(url, params={"after": big})
        assert (query.status_code, query.json()["code"]) == (422, "invalid_request")
        assert query.headers["content-type"] == "application/problem+json"


async def test_a_delta_is_sent_between_the_rows_it_came_between(database_url: str) -> None:
    """A stream that reads every row (its first read, a poll) may read rows committed after a
    delta still queued: the delta still goes out after the row before it, not after all."""
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        container = app.state.container
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            sid = await session_with(api, [])
        events = container.turns._deps.events
        stream = await container.turns.events(sid, 0)
        assert await anext(stream) == b": connected\n\n"  # subscribed; nothing read yet
        for phase in ("one", "two"):
            async with unit_of_work(container.db) as db:
                await events.emit(db, sid, "phase_changed", {"phase": phase})
            if phase == "one":
                events.delta(sid, "text_delta", {"text": "between"}, turn_id=None)
        frames = [await anext(stream) for _ in range(3)]
        await stream.aclose()
    kinds = [frame.split(b"\n")[1 if frame.startswith(b"id:") else 0] for frame in frames]
    assert kinds == [b"event: phase_changed", b"event: text_delta", b"event: phase_changed"]
    assert b'"phase":"one"' in frames[0]
    assert b'"phase":"two"' in frames[2]
