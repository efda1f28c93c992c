from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.providers.http_client import ProviderHTTP
from tests.providers.fakes import FakeProviderServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[ProviderHTTP]:
    """The adapters' HTTP client, as the service makes it (no proxy in its environment)."""
    client = ProviderHTTP(allow_private_hosts=True)
    try:
        yield client
    finally:
        await client.aclose()
