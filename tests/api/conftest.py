"""ASGI clients for the API tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.settings import Settings


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def stateless_client() -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app whose stateless routes need no database."""
    app = create_app(Settings(migrate_on_start=False, max_body_bytes=2_000_000))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client
