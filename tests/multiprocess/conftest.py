"""Several real ``uvicorn`` processes on one PostgreSQL database, with short leases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.fakes import FakeProviderServer
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

FAKE_KEY_ENV = "CTXSVC_TEST_FAKE_KEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def replica_pool(
    postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServerProcess]]:
    """Started once per module (a start costs seconds); ``replicas`` revives killed ones."""
    env = clean_env(
        CTXSVC_JSON_LOGS="false",
        CTXSVC_DATABASE_URL=postgres_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_TURN_LEASE_SECONDS="1.0",
        CTXSVC_TURN_WATCH_INTERVAL_SECONDS="0.2",
        CTXSVC_TURN_REAPER_INTERVAL_SECONDS="0.3",
        CTXSVC_EVENTS_POLL_SECONDS="0.1",
        CTXSVC_EVENTS_HEARTBEAT_SECONDS="1.0",
        **{FAKE_KEY_ENV: "sk-test"},
    )
    commands = [uvicorn_command(free_port()) for _ in range(2)]
    with running(commands, env=env, cwd=tmp_path_factory.mktemp("replicas"), logs=False) as servers:
        yield servers


@pytest.fixture
def steady_replicas(postgres_url: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """Two replicas with the default lease (25 s): a test of concurrent starts must not depend
    on a runner renewing a 1 s lease in time on a loaded machine (a turn whose lease lapsed is
    interrupted, and the next start is then rightly accepted)."""
    env = clean_env(
        CTXSVC_JSON_LOGS="false",
        CTXSVC_DATABASE_URL=postgres_url,
        CTXSVC_MIGRATE_ON_START="false",
        **{FAKE_KEY_ENV: "sk-test"},
    )
    commands = [uvicorn_command(free_port()) for _ in range(2)]
    with running(commands, env=env, cwd=tmp_path) as servers:
        yield servers


@pytest.fixture
def replicas(replica_pool: list[ServerProcess]) -> list[ServerProcess]:
    for server in replica_pool:
        if server.process is None or server.process.poll() is not None:
            server.start()
    return replica_pool


@pytest.fixture
def slow_provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(latency=30.0) as server:
        yield server
