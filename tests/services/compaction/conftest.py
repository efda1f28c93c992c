"""An app per test (both backends) with its container exposed, and fast summary retries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.container import Container
from app.main import create_app
from app.settings import Settings
from tests.conftest import make_settings

FAST: dict[str, Any] = {"summary_retry_delay_seconds": 0.0, "summary_attempt_timeout_seconds": 5.0}


@dataclass
class Harness:
    api: httpx.AsyncClient
    container: Container


async def harness_for(settings: Settings) -> AsyncIterator[Harness]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Harness(client, app.state.container)


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    async for h in harness_for(make_settings(database_url, **FAST)):
        yield h
