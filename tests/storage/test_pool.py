"""The PostgreSQL pool: sized by settings, and no new connections under steady concurrent load.

Every connection PostgreSQL opens is a new server process and an authentication (~2 ms of
database CPU); a pool smaller than the concurrency opens and closes overflow connections all
the time. The default pool holds 16 concurrent requests and the background loops.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.pool import QueuePool

from app.main import create_app
from app.settings import Settings
from tests.conftest import make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


def _pool(app: Any) -> QueuePool:
    pool = app.state.container.engine.sync_engine.pool
    assert isinstance(pool, QueuePool)
    return pool


def test_the_pool_is_sized_by_the_settings(postgres_url: str) -> None:
    settings = make_settings(
        postgres_url,
        db_pool_size=3,
        db_pool_max_overflow=2,
        db_pool_timeout_seconds=7,
        db_pool_recycle_seconds=-1,
    )
    pool = _pool(create_app(settings))
    assert (pool.size(), pool._max_overflow, pool._timeout, pool._recycle) == (3, 2, 7, -1)


def test_the_default_pool_holds_sixteen_requests_and_the_background(postgres_url: str) -> None:
    pool = _pool(create_app(make_settings(postgres_url)))
    assert pool.size() >= 16 + 2  # 16 clients, the lease reaper and an SSE poll
    assert pool._recycle == 1800


@pytest.mark.parametrize("recycle", [0, -2, -0.5])
def test_a_recycle_of_zero_or_below_but_never_is_refused(recycle: float) -> None:
    with pytest.raises(ValueError, match="db_pool_recycle_seconds"):
        Settings(db_pool_recycle_seconds=recycle, _env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("pool", "churns"),
    [({}, False), ({"db_pool_size": 5, "db_pool_max_overflow": 10}, True)],  # the old default
    ids=["default", "5+10"],
)
async def test_sixteen_concurrent_clients_open_no_connection_at_steady_state(
    postgres_url: str, pool: dict[str, int], churns: bool
) -> None:
    app = create_app(make_settings(postgres_url, **pool))
    opened: list[object] = []
    closed: list[object] = []
    engine = app.state.container.engine.sync_engine
    event.listen(engine, "connect", lambda *_: opened.append(1))
    # Churn is a connection closed when it comes back (an overflow one) and opened again later;
    # a pool that merely meets a 17th concurrent holder (the lease reaper beside 16 requests)
    # keeps it, which is no churn.
    event.listen(engine, "close", lambda *_: closed.append(1))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            model = {
                "context_window_tokens": 10_000,
                "max_output_tokens": 100,
                "provider": {"kind": "local"},
            }
            assert (await client.put("/v1/models/m", json=model)).status_code in (200, 201)
            body = {"model_id": "m", "agent": {"system_prompt": "p", "tools": []}}
            sessions = [
                (await client.post("/v1/sessions", json=body)).json()["id"] for _ in range(16)
            ]

            async def work(session_id: str) -> None:
                note = {"messages": [{"role": "user", "content": [{"type": "text", "text": "n"}]}]}
                response = await client.post(f"/v1/sessions/{session_id}/messages", json=note)
                assert response.status_code == 201
                assert (await client.get(f"/v1/sessions/{session_id}/context")).status_code == 200

            async def round_() -> None:
                await asyncio.gather(*(work(s) for s in sessions))

            await round_()  # warm-up: the pool grows to the concurrency it sees
            warm, warm_closed = len(opened), len(closed)
            for _ in range(5):
                await round_()
            # The old default closed overflow connections at every round and opened them again.
            churned = len(closed) - warm_closed
            assert (churned > 0) is churns, (
                f"{churned} closed and {len(opened) - warm} opened at steady state"
            )
            if churns:
                assert len(opened) > warm
