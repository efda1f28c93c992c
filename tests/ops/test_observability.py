"""Readiness, Prometheus metrics and request ids, as an operator or a caller sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from app.storage.migrate import upgrade_to_head
from tests.api.helpers import append, new_session, user
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio


async def test_readyz_is_503_until_the_database_is_migrated(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    async for client in client_for(make_settings(url, migrate_on_start=False)):
        assert (await client.get("/healthz")).status_code == 200  # alive, just not ready
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == "not_ready"
        assert "ctxsvc migrate" in response.json()["detail"]

        await upgrade_to_head(url)
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready"}


async def test_readyz_is_503_when_the_database_is_unreachable() -> None:
    # Nothing listens on port 1 of loopback: the connection is refused at once.
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    async for client in client_for(make_settings(url)):
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["code"] == "not_ready"


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list[Sample], name: str, **labels: str) -> float:
    matching = [s.value for s in found if s.name == name and labels.items() <= s.labels.items()]
    assert matching, f"no sample {name}{labels}"
    return sum(matching)


@pytest.fixture
async def api_client(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url)):
        yield client


async def test_metrics_report_routes_timings_and_the_pool(api_client: httpx.AsyncClient) -> None:
    session_id = await new_session(api_client)
    for n in range(3):
        assert (await append(api_client, session_id, user(f"hello {n}"))).status_code == 201
    assert (await append(api_client, session_id, {"role": "system"})).status_code == 422
    assert (await api_client.get(f"/v1/sessions/{session_id}/context")).status_code == 200
    assert (await api_client.get("/v1/sessions/no-such-session")).status_code == 404

    response = await api_client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)

    messages_route = "/v1/sessions/{session_id}/messages"
    # Route templates, never raw paths (which would make one series per session id).
    assert value(found, "ctxsvc_http_requests_total", route=messages_route, status="201") == 3
    assert value(found, "ctxsvc_http_requests_total", route=messages_route, status="422") == 1
    assert (
        value(found, "ctxsvc_http_requests_total", route="/v1/sessions/{session_id}", status="404")
        == 1
    )
    assert not any(session_id in s.labels.get("route", "") for s in found)
    assert (
        value(
            found,
            "ctxsvc_http_request_duration_seconds_count",
            method="POST",
            route=messages_route,
        )
        == 4
    )
    assert value(found, "ctxsvc_prepare_duration_seconds_count", kind="inspection") == 1
    # The pool the app's engine uses (a queue pool on both backends).
    assert value(found, "ctxsvc_db_pool_connections", state="size") >= 1
    # Requests returned their connections; only the turn lease reaper may be mid-sweep.
    assert value(found, "ctxsvc_db_pool_connections", state="checked_out") <= 1
    assert value(found, "ctxsvc_db_pool_connections", state="idle") >= 1


async def test_request_id_is_taken_from_a_sane_header(sqlite_api: httpx.AsyncClient) -> None:
    response = await sqlite_api.get("/healthz", headers={"X-Request-ID": "trace-42.a:b_c"})
    assert response.headers["x-request-id"] == "trace-42.a:b_c"


@pytest.mark.parametrize(
    "incoming",
    [None, "", "has space", "x" * 129, "new\u00e9line", "<script>"],
    ids=["missing", "empty", "space", "too-long", "non-ascii", "markup"],
)
async def test_request_id_is_generated_otherwise(
    sqlite_api: httpx.AsyncClient, incoming: str | None
) -> None:
    headers = {} if incoming is None else {b"X-Request-ID": incoming.encode("utf-8")}
    response = await sqlite_api.get("/healthz", headers=headers)
    generated = response.headers["x-request-id"]
    assert generated != incoming
    assert len(generated) == 32
    assert int(generated, 16) >= 0  # hex


async def test_errors_carry_the_request_id_too(sqlite_api: httpx.AsyncClient) -> None:
    response = await sqlite_api.get("/v1/sessions/missing", headers={"X-Request-ID": "abc-1"})
    assert response.status_code == 404
    assert response.headers["x-request-id"] == "abc-1"
