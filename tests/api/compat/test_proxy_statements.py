"""What a continuing proxied call runs through SQLAlchemy before the provider is called, on
SQLite and PostgreSQL: reads only (its writes are queued and sent together: ``app.storage.
deferred``), and no read of the messages (the last answer was added to the process's read of the
Conversation by the write that stored it). Statements sent from the queue pass no SQLAlchemy
event, so they are not seen here."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from app.services.proxy.service import ProxyCall

pytestmark = pytest.mark.anyio

PATH = "/v1/compat/openai/chat/completions"


class Statements:
    """The statements executed through SQLAlchemy (``seen``, since the test last cleared it),
    and those that had run when the provider was last called (``before_provider``)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.before_provider: list[str] = []
        # The request's task (the ASGI transport runs the app in the caller's): the service's
        # sweepers run statements of their own meanwhile.
        self.task: asyncio.Task[Any] | None = None

    def record(self, *args: Any) -> None:
        if asyncio.current_task() is self.task:
            self.seen.append(" ".join(args[2].split()))


@pytest.fixture
def statements(
    app_api: tuple[FastAPI, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Statements]:
    app, _ = app_api
    engine = app.state.container.engine.sync_engine
    recorded = Statements()
    send = ProxyCall._send

    async def sending(self: ProxyCall, sink: Any) -> Any:
        recorded.before_provider = list(recorded.seen)
        return await send(self, sink)

    event.listen(engine, "before_cursor_execute", recorded.record)
    monkeypatch.setattr(ProxyCall, "_send", sending)
    yield recorded
    event.remove(engine, "before_cursor_execute", recorded.record)


async def test_a_proxied_call_only_reads_before_the_provider_call(
    app_api: tuple[FastAPI, httpx.AsyncClient], statements: Statements
) -> None:
    app, api = app_api
    statements.task = asyncio.current_task()
    history: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} {uuid.uuid4().hex}"}
        for i in range(9)
    ]
    for call in range(2):
        statements.seen.clear()
        response = await api.post(PATH, json={"model": "local", "messages": history})
        assert response.status_code == 200, response.text
        if call == 0:
            # A session made in this transaction has no turn and no previous request to read.
            # It is written with its counters kept on the row: no UPDATE, no read under a lock.
            first = statements.before_provider
            assert not any("FROM turns" in s or "request_prefixes" in s for s in first), first
            assert not any(s.startswith("UPDATE") for s in first), first
            assert not any(s.startswith("SELECT sessions.") for s in first), first
        answer = response.json()["choices"][0]["message"]["content"]
        history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "and?"}]
        await app.state.container.proxy.settled(response.headers["x-ctxsvc-session-id"])
    before = statements.before_provider
    assert before, "the call ran no statement through SQLAlchemy"
    assert all(s.startswith("SELECT") for s in before), before
    assert not any(" FROM messages " in f"{s} " for s in before), before
