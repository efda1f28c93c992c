"""After a read-only or full database, readiness comes back with the first committed write,
not with any request that answered 2xx (spec §8): a request that writes nothing proves
nothing about the disk."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.api.helpers import session_body, text, user
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client


async def test_only_a_committed_write_turns_readiness_back_on(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served
    assert (await client.get("/readyz")).status_code == 200
    # What a request that met a full disk reports (``UnexpectedErrors``).
    app.state.container.outages.seen("full", OSError(28, "No space left on device"))
    assert (await client.get("/readyz")).status_code == 503

    counted = await client.post("/v1/tokens/count", json={"counter": "estimate", "text": "hi"})
    assert counted.status_code == 200, counted.text
    prepared = await client.post(
        "/v1/prepare",
        json={
            "system_context": [{"key": "agent", "content": text("agent")}],
            "conversation": [{**user("hi"), "origin": {"type": "real"}}],
            "model": {"context_window_tokens": 1000, "max_output_tokens": 100},
        },
    )
    assert prepared.status_code == 200, prepared.text
    missing = await client.patch("/v1/sessions/nope", json={"title": "t"})
    assert missing.status_code == 404, missing.text
    still = await client.get("/readyz")
    assert still.status_code == 503, still.text
    assert "full" in still.json()["detail"]

    created = await client.post("/v1/sessions", json=session_body())
    assert created.status_code == 201, created.text
    assert (await client.get("/readyz")).status_code == 200
