"""Keyed apps for the tenancy tests: one configured admin key (the ``default`` tenant) and
tenant keys made through the admin API, all over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import client_for, make_settings

ADMIN_KEY = "admin-3f9a1c7e5b2d4f60a8c1e9b7d3f5a2c4"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ADMIN = bearer(ADMIN_KEY)


def fresh(tenant: str) -> str:
    """A tenant id no other test uses (the PostgreSQL database is shared by the run)."""
    return f"{tenant}-{uuid.uuid4().hex[:8]}"


async def issue_key(
    api: httpx.AsyncClient, tenant_id: str, scope: str = "tenant", **body: Any
) -> dict[str, Any]:
    response = await api.post(
        "/v1/admin/keys", json={"tenant_id": tenant_id, "scope": scope, **body}, headers=ADMIN
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.fixture
async def keyed_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app with one configured key, once per backend."""
    async for client in client_for(make_settings(database_url, api_keys=[ADMIN_KEY])):
        yield client
