"""The fake provider itself: what the adapter tests rely on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.providers.fakes import (
    SSE,
    ErrorReply,
    FakeProviderServer,
    StreamReply,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client: these tests look at the fake itself, not through an adapter."""
    async with httpx.AsyncClient() as client:
        yield client


async def test_serves_replies_in_order_and_records_requests(
    fake_server: FakeProviderServer, http: httpx.AsyncClient
) -> None:
    fake_server.enqueue(StreamReply([SSE("one"), SSE("two", event="x")]), ErrorReply(418, {"a": 1}))
    first = await http.post(fake_server.base_url + "/p", json={"n": 1}, headers={"X-K": "v"})
    second = await http.post(fake_server.base_url + "/q", content=b"raw")
    assert first.status_code == 200
    assert first.text == "data: one\n\nevent: x\ndata: two\n\n"
    assert (second.status_code, second.json()) == (418, {"a": 1})
    recorded = fake_server.requests
    assert [r.path for r in recorded] == ["/p", "/q"]
    assert recorded[0].json() == {"n": 1}
    assert recorded[0].headers["x-k"] == "v"
    assert recorded[1].body == b"raw"
    assert fake_server.pending_replies == 0


async def test_an_empty_script_answers_500(
    fake_server: FakeProviderServer, http: httpx.AsyncClient
) -> None:
    response = await http.post(fake_server.base_url + "/x")
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "fake_script_exhausted"


async def test_drop_after_breaks_the_stream(
    fake_server: FakeProviderServer, http: httpx.AsyncClient
) -> None:
    fake_server.enqueue(StreamReply([SSE("a"), SSE("b")], drop_after=1))
    with pytest.raises(httpx.RemoteProtocolError):
        await http.post(fake_server.base_url + "/x")


def test_latency_delays_every_reply() -> None:
    import time

    with FakeProviderServer(latency=0.2) as server, httpx.Client() as client:
        server.enqueue(ErrorReply(404, {}))
        started = time.monotonic()
        client.post(server.base_url + "/x")
        assert time.monotonic() - started >= 0.2
