"""Several real ``uvicorn`` processes on one PostgreSQL database, with short leases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.multiprocess.servers import ServerProcess, server_processes
from tests.providers.fakes import FakeProviderServer

FAKE_KEY_ENV = "CTXSVC_TEST_FAKE_KEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def replica_pool(postgres_url: str) -> Iterator[list[ServerProcess]]:
    """Started once per module (a start costs seconds); ``replicas`` revives killed ones."""
    env = {
        "CTXSVC_DATABASE_URL": postgres_url,
        "CTXSVC_MIGRATE_ON_START": "false",
        "CTXSVC_API_KEYS": "[]",
        "CTXSVC_WORKSPACE_ROOTS": "[]",
        "CTXSVC_TURN_LEASE_SECONDS": "1.0",
        "CTXSVC_TURN_WATCH_INTERVAL_SECONDS": "0.2",
        "CTXSVC_TURN_REAPER_INTERVAL_SECONDS": "0.3",
        "CTXSVC_EVENTS_POLL_SECONDS": "0.1",
        "CTXSVC_EVENTS_HEARTBEAT_SECONDS": "1.0",
        FAKE_KEY_ENV: "sk-test",
    }
    with server_processes(2, env) as servers:
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
