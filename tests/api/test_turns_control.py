"""Starting, feeding, cancelling and recovering turns (spec §6): check order, idempotency, busy,
skills, tool-result validation, cancellation, leases."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.storage.base import utc_now
from app.storage.database import unit_of_work
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import (
    append,
    assistant,
    assistant_calls,
    new_session,
    run_turn,
    scripted_model,
    user,
)
from tests.api.test_turns import agent, call, history, ok, post_results, session_with
from tests.conftest import client_for, make_settings
from tests.providers.fakes import FakeProviderServer, FakeToolCall, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

Client = tuple[FastAPI, httpx.AsyncClient]


@pytest.fixture
async def app_client(database_url: str) -> AsyncIterator[Client]:
    """The app itself (to reach its container) and a client; short leases for the reaper."""
    # Short enough to wait for it to lapse, long enough that a live runner, renewing at a third
    # of it, keeps it on a loaded machine.
    app = create_app(make_settings(database_url, turn_lease_seconds=2.0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    with FakeProviderServer() as server:
        yield server


async def provider_model(api: httpx.AsyncClient, server: FakeProviderServer) -> str:
    model_id = f"fake-{uuid.uuid4().hex[:8]}"
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": "openai_chat",
            "base_url": server.base_url + "/v1",
            "model_name": "gpt-fake",
            "api_key_env": "CTXSVC_TEST_FAKE_KEY",
        },
    }
    assert (await api.put(f"/v1/models/{model_id}", json=body)).status_code == 201
    return model_id


def start_body(crid: str | None = None, *items: dict[str, Any]) -> dict[str, Any]:
    return {
        "client_request_id": crid or uuid.uuid4().hex,
        "input": list(items) or [{"type": "text", "text": "go"}],
    }


async def waiting_turn(api: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    sid = await session_with(api, [{"tool_calls": [call("read", path="a")]}, {"text": "done"}])
    turn = await run_turn(api, sid, client_request_id="first")
    assert turn["phase"] == "waiting_tool_results"
    return sid, turn


async def test_start_checks_come_in_spec_order(app_client: Client) -> None:
    app, api = app_client
    sid, turn = await waiting_turn(api)
    url = f"/v1/sessions/{sid}/turns"
    # The same client_request_id returns the accepted turn (200), even while it runs.
    again = await api.post(url, json=start_body("first"))
    assert again.status_code == 200
    assert again.json()["turn_id"] == turn["turn_id"]
    busy = await api.post(url, json=start_body("second"))
    assert busy.status_code == 409
    assert busy.json()["code"] == "busy"
    assert busy.json()["turn_id"] == turn["turn_id"]
    # Empty input is refused before anything else, even for a known request id.
    empty = await api.post(url, json=start_body("first", {"type": "skill", "name": "x"}))
    assert empty.status_code == 422
    assert empty.json()["code"] == "empty_input"
    async with unit_of_work(app.state.container.db) as db:
        await SessionRepository(db).set_reload_required(sid, True)
    reload = await api.post(url, json=start_body("first"))
    assert reload.status_code == 409
    assert reload.json()["code"] == "reload_required"
    assert len(await history(api, sid)) == 2  # user + assistant: nothing new stored


async def test_a_request_id_reused_with_another_input_is_refused_also_after_a_restart(
    database_url: str,
) -> None:
    """The same ``client_request_id`` names one request: with its input it answers that turn
    again; with another input it is refused (422) and starts nothing, in this process or the
    next one on the same database."""
    first = start_body("req-1", {"type": "text", "text": "Fix the parser."})
    other = start_body("req-1", {"type": "text", "text": "Delete the parser."})
    skilled = start_body(
        "req-1", {"type": "text", "text": "Fix the parser."}, {"type": "skill", "name": "x"}
    )
    for restart in (False, True):
        async for api in client_for(make_settings(database_url)):
            if not restart:
                sid = await session_with(api, [{"text": "Fixed."}])
                url = f"/v1/sessions/{sid}/turns"
                accepted = await api.post(url, params={"wait": "true"}, json=first)
                assert accepted.status_code == 202, accepted.text
                turn = accepted.json()
            for body in (other, skilled):
                refused = await api.post(url, json=body)
                assert refused.status_code == 422, refused.text
                assert refused.json()["code"] == "client_request_id_reused"
                assert refused.json()["turn_id"] == turn["turn_id"]
            again = await api.post(url, json=first)
            assert again.status_code == 200, again.text
            assert again.json() == {**turn, "updated_at": again.json()["updated_at"]}
            assert [m["content"][0]["text"] for m in await history(api, sid)] == [
                "Fix the parser.",
                "Fixed.",
            ]


async def test_unknown_session_and_turn_are_404(api: httpx.AsyncClient) -> None:
    missing = await api.post("/v1/sessions/nope/turns", json=start_body())
    assert missing.status_code == 404
    assert missing.json()["code"] == "session_not_found"
    sid = await new_session(api)
    unknown = await api.get(f"/v1/sessions/{sid}/turns/turn-x")
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "turn_not_found"


async def test_tool_results_are_validated_and_refusals_store_nothing(
    api: httpx.AsyncClient,
) -> None:
    sid, turn = await waiting_turn(api)
    (pending,) = turn["pending_tool_calls"]
    call_id, tid = pending["tool_call_id"], turn["turn_id"]
    unknown = await post_results(api, sid, tid, ok("other"), wait=False)
    assert unknown.status_code == 422
    assert unknown.json()["code"] == "unknown_tool_call"
    twice = await post_results(api, sid, tid, ok(call_id), ok(call_id), wait=False)
    assert twice.status_code == 422
    assert twice.json()["code"] == "duplicate_tool_result"
    empty = await post_results(api, sid, tid, wait=False)
    assert empty.status_code == 422
    assert empty.json()["code"] == "no_tool_results"
    assert len(await history(api, sid)) == 2
    assert (await post_results(api, sid, tid, ok(call_id), wait=True)).json()["status"] == (
        "completed"
    )
    late = await post_results(api, sid, tid, ok(call_id), wait=False)
    assert late.status_code == 409
    assert late.json()["code"] == "turn_not_waiting"


async def test_cancel_while_waiting_for_tool_results(api: httpx.AsyncClient) -> None:
    sid, turn = await waiting_turn(api)
    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{turn['turn_id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["pending_tool_calls"] == []
    (result,) = [m["content"][0] for m in await history(api, sid) if m["role"] == "tool"]
    assert result["state"] == "interrupted"
    assert (
        result["output"][0]["text"] == "tool was not executed because the turn already terminated"
    )
    again = await api.post(f"/v1/sessions/{sid}/turns/{turn['turn_id']}/cancel")
    assert again.status_code == 409
    assert again.json()["code"] == "turn_not_active"
    # The session is free again.
    assert (await api.post(f"/v1/sessions/{sid}/turns", json=start_body())).status_code == 202


async def test_cancel_abandons_a_pending_model_call(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    provider.latency = 30.0
    provider.enqueue(StreamReply(openai_stream(text=["too late"])))
    sid = await new_session(api, model_id=await provider_model(api, provider))
    started = await api.post(f"/v1/sessions/{sid}/turns", json=start_body())
    tid = started.json()["turn_id"]
    await provider.arrived()  # the model call is pending
    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{tid}/cancel")
    assert cancelled.json()["status"] == "cancelled", cancelled.text
    assert [m["role"] for m in await history(api, sid)] == ["user"]
    # The provider request was closed, not left to run (and be billed) for nothing.
    await provider.abandoned_by_client(1)


class CancelledAsItAnswers:
    """A model client whose answer arrives together with a cancel of every local turn."""

    def __init__(self, inner: Any, app: FastAPI) -> None:
        self._inner = inner
        self._app = app

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: Any = None,
        caching: Any = None,
        conversation: Any = None,
    ) -> Any:
        response = await self._inner.complete(
            request, sink=sink, caching=caching, conversation=conversation
        )
        # Set in the same step of the event loop as the answer: the call is not abandoned,
        # the runner sees the cancel right after it (the flag ``POST .../cancel`` sets).
        for runner, _ in self._app.state.container.turns._runners.values():
            runner.cancel.set()
        return response


async def test_cancel_as_the_model_answers_with_calls_stores_the_answer_and_their_results(
    app_client: Client,
) -> None:
    app, api = app_client
    clients = app.state.container.model_clients
    for_model = clients.for_model
    clients.for_model = lambda entry, **kw: CancelledAsItAnswers(for_model(entry, **kw), app)
    sid = await session_with(
        api, [{"text": "Reading.", "tool_calls": [call("read", path="a"), call("read", path="b")]}]
    )
    turn = await run_turn(api, sid)
    assert turn["status"] == "cancelled", turn
    messages = await history(api, sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    calls = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_call"]
    results = [m["content"][0] for m in messages[2:]]
    assert [r["id"] for r in results] == calls
    assert {r["state"] for r in results} == {"interrupted"}
    assert {r["output"][0]["text"] for r in results} == {
        "tool was not executed because the turn already terminated"
    }
    sequences = [m["sequence"] for m in messages[1:]]
    assert sequences == list(range(sequences[0], sequences[0] + 3))


class CancelledElsewhereAsItAnswers:
    """A model client whose answer arrives with a cancel recorded only in the database, as
    ``POST .../cancel`` on another replica records it: this runner learns of it in its tool step
    (the watcher is too slow to tell it first)."""

    def __init__(self, inner: Any, app: FastAPI, session_id: str) -> None:
        self._inner = inner
        self._app = app
        self._session_id = session_id

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: Any = None,
        caching: Any = None,
        conversation: Any = None,
    ) -> Any:
        response = await self._inner.complete(
            request, sink=sink, caching=caching, conversation=conversation
        )
        async with unit_of_work(self._app.state.container.db) as db:
            turns = TurnRepository(db)
            running = await turns.get_running(self._session_id)
            assert running is not None
            assert await turns.request_cancel(self._session_id, running.turn_id)
        return response


async def test_a_cancel_seen_by_the_step_that_would_wait_for_tools_ends_the_turn(
    database_url: str,
) -> None:
    app = create_app(make_settings(database_url, turn_watch_interval_seconds=30))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            sid = await session_with(api, [{"tool_calls": [call("read", path="a")]}])
            clients = app.state.container.model_clients
            for_model = clients.for_model
            clients.for_model = lambda entry, **kw: CancelledElsewhereAsItAnswers(
                for_model(entry, **kw), app, sid
            )
            turn = await run_turn(api, sid)
            assert (turn["status"], turn["phase"]) == ("cancelled", "terminal"), turn
            assert turn["pending_tool_calls"] == []
            messages = await history(api, sid)
            assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
            result = messages[2]["content"][0]
            assert (result["state"], result["output"][0]["text"]) == (
                "interrupted",
                "tool was not executed because the turn already terminated",
            )
            clients.for_model = for_model
            started = await api.post(f"/v1/sessions/{sid}/turns", json=start_body())
            assert started.status_code == 202, started.text  # the session is free again


async def test_provider_turn_sends_tool_results_in_the_next_request(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    calls = [
        FakeToolCall("c1", "read", ['{"path":', ' "a"}']),
        FakeToolCall("c2", "read", ['{"path": "b"}']),
    ]
    provider.enqueue(
        StreamReply(openai_stream(text=["Reading."], tool_calls=calls, finish_reason="tool_calls")),
        StreamReply(openai_stream(text=["All ", "read."])),
    )
    model_id = await provider_model(api, provider)
    sid = await new_session(api, model_id=model_id, agent=agent())
    turn = await run_turn(api, sid)
    assert [c["tool_call_id"] for c in turn["pending_tool_calls"]] == ["c1", "c2"]
    done = await post_results(
        api, sid, turn["turn_id"], ok("c2", "B", "error"), ok("c1", "A"), wait=True
    )
    assert done.json()["outcome"] == {"final_text": "All read."}
    second = provider.requests[1].json()
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert next((m["tool_call_id"], m["content"]) for m in tool_messages)[0] == "c1"
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2"]
    assert "B" in str(tool_messages[1]["content"])


async def test_the_next_turn_sends_what_was_stored_between_turns(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    # A session's next turn extends this process's last read of its Conversation: messages
    # stored in between by another writer must still reach the model, in order.
    provider.enqueue(
        StreamReply(openai_stream(text=["first answer"])),
        StreamReply(openai_stream(text=["second answer"])),
    )
    model_id = await provider_model(api, provider)
    sid = await new_session(api, model_id=model_id, agent=agent())
    assert (await run_turn(api, sid))["status"] == "completed"
    appended = await append(api, sid, user("between turns"), assistant("noted"))
    assert appended.status_code == 201, appended.text
    assert (await run_turn(api, sid))["status"] == "completed"
    second = provider.requests[1].json()["messages"]
    # (World State messages such as the sandbox policy sit in between; they are not asserted.)
    sent = [(m["role"], m["content"]) for m in second if m["role"] != "system"]
    wanted = [
        ("user", "go"),
        ("assistant", "first answer"),
        ("user", "between turns"),
        ("assistant", "noted"),
        ("user", "go"),
    ]
    assert [m for m in sent if m in wanted] == wanted


async def turn_whose_runner_died(
    app: FastAPI, api: httpx.AsyncClient, provider: FakeProviderServer, sid: str
) -> str:
    """Start a turn whose model call hangs, then let its runner die as in a killed process (no
    sweep runs either) until its lease has lapsed; the turn's id."""
    provider.latency = 30.0
    provider.enqueue(StreamReply(openai_stream(text=["never"])))
    started = await api.post(f"/v1/sessions/{sid}/turns", json=start_body())
    turn_id = str(started.json()["turn_id"])
    await provider.arrived()
    with anyio.fail_after(30):
        await app.state.container.turns.abandon()
        while True:  # the lease (2 s) runs out, however long the machine takes
            async with unit_of_work(app.state.container.db, read_only=True) as db:
                row = await TurnRepository(db).get(sid, turn_id)
            assert row is not None
            assert row.lease_expires_at is not None
            if row.lease_expires_at < utc_now():
                return turn_id
            await asyncio.sleep(0.05)


async def test_a_start_on_a_session_whose_turn_lost_its_runner_interrupts_it_and_starts(
    app_client: Client, provider: FakeProviderServer
) -> None:
    app, api = app_client
    turns = app.state.container.turns
    sid = await new_session(api, model_id=await provider_model(api, provider))
    dead = await turn_whose_runner_died(app, api, provider, sid)
    async with unit_of_work(app.state.container.db, read_only=True) as db:
        row = await TurnRepository(db).get(sid, dead)
        assert row is not None
        assert row.status == "running"
    # The start itself finds the expired turn, interrupts it and starts.
    fresh = await api.post(f"/v1/sessions/{sid}/turns", json=start_body())
    assert fresh.status_code == 202, fresh.text
    old = (await api.get(f"/v1/sessions/{sid}/turns/{dead}")).json()
    assert (old["status"], old["outcome"]["code"]) == ("interrupted", "process_restart")
    # The new turn is live (its model call pending on the slow fake): cancel it before teardown.
    new_id = fresh.json()["turn_id"]
    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{new_id}/cancel")
    assert cancelled.json()["status"] == "cancelled", cancelled.text
    await turns.start_background()


async def test_expired_lease_interrupts_and_later_requests_synthesize_results(
    app_client: Client, provider: FakeProviderServer
) -> None:
    app, api = app_client
    turns = app.state.container.turns
    sid = await new_session(api, model_id=await provider_model(api, provider))
    # A dangling call from before: stays unanswered in storage.
    assert (await append(api, sid, assistant_calls(("dangling", "read")))).status_code == 201
    tid = await turn_whose_runner_died(app, api, provider, sid)
    turn = (await api.get(f"/v1/sessions/{sid}/turns/{tid}")).json()
    assert (turn["status"], turn["phase"]) == ("interrupted", "terminal")
    assert turn["outcome"]["code"] == "process_restart"
    roles = [m["role"] for m in await history(api, sid)]
    assert roles == ["assistant", "user"]  # nothing replayed, nothing lost
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    synthesized = [m for m in context["request"]["messages"] if m["role"] == "tool"]
    assert synthesized[0]["content"][0]["state"] == "interrupted"
    await turns.start_background()
    scripted = await scripted_model(api, [{"text": "fresh"}])
    assert (await api.patch(f"/v1/sessions/{sid}", json={"model_id": scripted})).status_code == 200
    assert (await run_turn(api, sid))["status"] == "completed"
