"""The lease reaper takes a session's row before its turn's, as a turn's runner and a start do:
on PostgreSQL the opposite order deadlocked a reaper with a runner step (500s under concurrent
starts on two replicas)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from app.container import Container
from app.services.turns.lease import reap_expired
from app.storage.database import unit_of_work
from app.storage.repositories import SessionRepository, TurnRepository
from tests.conftest import make_settings
from tests.storage.conftest import new_agent_session

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

WAIT_DEADLINE_SECONDS = 60.0


@pytest.fixture
async def container(postgres_url: str) -> AsyncIterator[Container]:
    built = Container.build(make_settings(postgres_url))
    try:
        yield built
    finally:
        await built.aclose()


async def lock_waiters(container: Container) -> int:
    async with container.engine.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
        return int(found.scalar_one())


async def test_a_reaper_waits_for_a_runner_step_that_holds_the_session(
    container: Container,
) -> None:
    expired = datetime.now(UTC) - timedelta(seconds=5)
    async with unit_of_work(container.db) as db:
        sid = (await SessionRepository(db).add(new_agent_session())).id
        await TurnRepository(db).create_running(
            session_id=sid,
            turn_id="t1",
            client_request_id=f"r-{uuid.uuid4().hex}",
            input=[{"type": "text", "text": "go"}],
            phase="running_model",
            lease_owner="slow-runner",
            lease_expires_at=expired,
        )
    renewed = datetime.now(UTC) + timedelta(minutes=5)
    async with unit_of_work(container.db) as step:  # a runner's step: the session's lock first
        await SessionRepository(step).lock(sid)
        reaper = asyncio.create_task(reap_expired(container))
        deadline = time.monotonic() + WAIT_DEADLINE_SECONDS
        while await lock_waiters(container) == 0:  # the reaper queues behind the step
            assert not reaper.done(), reaper
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # ... then the step writes its turn (the lease renewed late, under load).
        assert await TurnRepository(step).renew_lease(
            sid, "t1", owner="slow-runner", expires_at=renewed
        )
    reaped = await asyncio.wait_for(reaper, WAIT_DEADLINE_SECONDS)
    assert (sid, "t1") not in reaped  # renewed before the reaper could look under the lock
    async with unit_of_work(container.db, read_only=True) as db:
        turn = await TurnRepository(db).get(sid, "t1")
    assert turn is not None
    assert turn.status == "running"
