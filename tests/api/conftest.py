"""The stateless client runs on SQLite too (every app has a database); it just never writes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import client_for, make_settings


@pytest.fixture
async def stateless_client(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(sqlite_url)):
        yield client
