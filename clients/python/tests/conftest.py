"""The client's tests run it against the real service: ``uvicorn app.main:app`` on loopback.

One open server and one keyed server for the whole run (a start costs seconds), each on its own
SQLite file; every test makes its own sessions and models (fresh ids). ``CuttableProxy`` stands
between a client and a server so that a test can drop connections and refuse new ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from client_support import API_KEY, CuttableProxy
from tests.servers import ServerProcess, streaming_server

# Retried summaries (a failing summary model) without the 3 s between attempts.
FAST_RETRIES = {"CTXSVC_SUMMARY_RETRY_DELAY_SECONDS": "0"}


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with streaming_server(tmp_path_factory.mktemp("client-server"), **FAST_RETRIES) as process:
        yield process


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cwd = tmp_path_factory.mktemp("client-keyed-server")
    with streaming_server(cwd, CTXSVC_API_KEYS=json.dumps([API_KEY]), **FAST_RETRIES) as process:
        yield process


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def proxy(server: ServerProcess) -> Iterator[CuttableProxy]:
    cutter = CuttableProxy(server.port)
    try:
        yield cutter
    finally:
        cutter.close()
