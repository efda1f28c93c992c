"""The answer of a proxied call is stored after the caller has it (``app.services.proxy.answers``;
docs/decisions.md, "The drop-in endpoints store the answer after the response"), on SQLite and
PostgreSQL, through the app with the ``local`` model: the next request of the conversation finds
it stored; a write that loses the race with the next request (as on another worker) or is lost
stores nothing twice, the next request storing the answer from its history instead."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.services.proxy.answers import PendingAnswers
from app.services.proxy.service import ProxyService
from tests.api.helpers import new_session, stored, world_state_texts
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

PATH = "/v1/compat/openai/chat/completions"


def hello() -> list[dict[str, Any]]:
    """A first message no other test sends (the PostgreSQL database is shared by the tests, and
    a proxied history continues any session of its tenant and family that holds it)."""
    return [{"role": "user", "content": f"hi {uuid.uuid4().hex}"}]


async def ask(
    api: httpx.AsyncClient, history: list[dict[str, Any]], *, stream: bool = False
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """One call with ``history``; the history with the answer, as the SDK keeps it."""
    response = await api.post(PATH, json={"model": "local", "messages": history, "stream": stream})
    assert response.status_code == 200, response.text
    if stream:
        text = "".join(
            chunk["choices"][0]["delta"].get("content") or ""
            for line in response.text.splitlines()
            if line.startswith("data: {")
            for chunk in [httpx.Response(200, content=line[6:]).json()]
            if chunk["choices"]
        )
    else:
        text = response.json()["choices"][0]["message"]["content"]
    return response, [*history, {"role": "assistant", "content": text}]


async def transcript(api: httpx.AsyncClient, sid: str) -> list[tuple[str, str]]:
    page = (await api.get(f"/v1/sessions/{sid}/messages", params={"limit": 100})).json()
    return [
        (m["role"], "".join(b.get("text", "") for b in m["content"]))
        for m in page["messages"]
        if m["kind"] == "normal"
    ]


@pytest.fixture
def slow_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each answer's write held back until something waits for it (the next request, a read):
    what follows the response finds the write still pending, on any machine. Should nothing
    wait (the behaviour under test broken), the write goes on after a generous deadline and the
    test fails on what it reads."""
    gate = asyncio.Event()
    write = ProxyService._write_answer
    wait = PendingAnswers.wait

    async def held(self: ProxyService, *args: Any) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gate.wait(), timeout=30)
        await write(self, *args)

    async def waiting(self: PendingAnswers, keys: Sequence[Hashable]) -> None:
        if any(self._pending.get(key) for key in keys):
            gate.set()  # a write is pending and something waits for it: let it finish
        await wait(self, keys)

    monkeypatch.setattr(ProxyService, "_write_answer", held)
    monkeypatch.setattr(PendingAnswers, "wait", waiting)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.usefixtures("slow_writes")
async def test_the_next_request_finds_the_answer_stored_after_the_response(
    app_api: tuple[FastAPI, httpx.AsyncClient], stream: bool
) -> None:
    _, api = app_api
    first, history = await ask(api, hello(), stream=stream)
    sid = first.headers["x-ctxsvc-session-id"]
    # At once, while the answer may still be being written: it waits for it, and continues.
    second, history = await ask(api, [*history, {"role": "user", "content": "and?"}], stream=stream)
    assert second.headers["x-ctxsvc-session-id"] == sid
    assert "x-ctxsvc-forked-from" not in second.headers
    assert await transcript(api, sid) == [
        ("user", history[0]["content"]),
        ("assistant", history[1]["content"]),
        ("user", "and?"),
        ("assistant", history[3]["content"]),
    ]


@pytest.mark.usefixtures("slow_writes")
async def test_the_transcript_holds_the_answer_as_soon_as_the_caller_has_it(
    app_api: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = app_api
    first, history = await ask(api, hello())
    sid = first.headers["x-ctxsvc-session-id"]
    assert await transcript(api, sid) == [
        ("user", history[0]["content"]),
        ("assistant", history[1]["content"]),
    ]


async def test_a_write_that_loses_the_race_with_the_next_request_stores_nothing_twice(
    app_api: tuple[FastAPI, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when the next request reaches another worker first: this process does not wait."""
    app, api = app_api
    release = asyncio.Event()
    write = ProxyService._write_answer

    async def late(self: ProxyService, *args: Any) -> None:
        await release.wait()
        await write(self, *args)

    async def no_wait(self: PendingAnswers, keys: Any) -> None:
        return None

    monkeypatch.setattr(ProxyService, "_write_answer", late)
    monkeypatch.setattr(PendingAnswers, "wait", no_wait)
    first, history = await ask(api, hello())
    sid = first.headers["x-ctxsvc-session-id"]
    second, history = await ask(api, [*history, {"role": "user", "content": "and?"}])
    # The session continued with the answer as the client echoed it.
    assert second.headers["x-ctxsvc-session-id"] == sid
    assert "x-ctxsvc-forked-from" not in second.headers
    release.set()
    await app.state.container.proxy.aclose()
    roles = [role for role, _ in await transcript(api, sid)]
    assert roles == ["user", "assistant", "user", "assistant"]
    # The late write stored no answer, and still counted its call (the provider did the work).
    usage = (await api.get(f"/v1/sessions/{sid}")).json()["usage"]
    assert usage["proxied_calls"] == 2
    assert usage["turns"] == 0
    assert usage["output_tokens"] > 0


async def test_a_lost_write_is_stored_from_the_next_requests_history(
    app_api: tuple[FastAPI, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process stopped (or the write failed) after the response: the caller keeps the
    answer, and its next request carries it."""
    app, api = app_api

    async def failing(self: ProxyService, *args: Any) -> None:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(ProxyService, "_write_answer", failing)
    first, history = await ask(api, hello())
    sid = first.headers["x-ctxsvc-session-id"]
    await app.state.container.proxy.aclose()
    assert await transcript(api, sid) == [("user", history[0]["content"])]
    monkeypatch.undo()
    second, history = await ask(api, [*history, {"role": "user", "content": "and?"}])
    assert second.headers["x-ctxsvc-session-id"] == sid
    assert "x-ctxsvc-forked-from" not in second.headers
    await app.state.container.proxy.aclose()
    assert await transcript(api, sid) == [
        ("user", history[0]["content"]),
        ("assistant", history[1]["content"]),
        ("user", "and?"),
        ("assistant", history[3]["content"]),
    ]
    # The lost write's call is not counted: its figures are in no history.
    assert (await api.get(f"/v1/sessions/{sid}")).json()["usage"]["proxied_calls"] == 1


async def test_a_named_session_whose_world_state_reads_files_is_sampled_and_answered(
    database_url: str, tmp_path: Path
) -> None:
    """Its World State is read from a workspace directory, outside the transaction that stores
    the request (no lock held while the files are read): the prepare's own transactions."""
    root = (tmp_path / "allowed").resolve()
    repo = root / "repo"
    repo.mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Be brief.\n")
    settings = make_settings(database_url, workspace_roots=[str(root)])
    async for api in client_for(settings):
        sid = await new_session(api, workspace={"working_directory": str(repo)})
        response = await api.post(
            PATH,
            json={"model": "local", "messages": hello()},
            headers={"X-Ctxsvc-Session-Id": sid},
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-ctxsvc-session-id"] == sid
        messages = await stored(api, sid)
        assert any("Be brief." in text for text in world_state_texts(messages))
        assert [m["role"] for m in messages if m["kind"] == "normal"] == ["user", "assistant"]
