"""Clients of the app in process: the stateless one runs on SQLite too (every app has a
database; it just never writes); ``app_api`` gives the app beside its client, per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.conftest import client_for, make_settings


@pytest.fixture
async def stateless_client(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(sqlite_url)):
        yield client


@pytest.fixture
async def app_api(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client
