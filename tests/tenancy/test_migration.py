"""Revision ``2026_12_05_1600`` (tenants): sessions and models stored before it belong to the
``default`` tenant, so the configured key reads them as before; the downgrade keeps the default
tenant's rows; on both backends."""

from __future__ import annotations

import pytest

from app.storage.database import create_session_factory, unit_of_work
from app.storage.migrate import upgrade_to_head
from app.storage.models import RegisteredModel
from app.storage.repositories import SessionRepository
from app.storage.repositories.registry import ModelRepository
from tests.conftest import client_for, make_settings
from tests.storage.conftest import new_agent_session
from tests.storage.test_migrated_rows import _columns
from tests.storage.test_migrations import _downgrade_to, _engine_at_head
from tests.tenancy.conftest import ADMIN, ADMIN_KEY, bearer, issue_key

pytestmark = pytest.mark.anyio

BEFORE = "2026_12_05_1540"


def _model(tenant_id: str, model_id: str) -> RegisteredModel:
    return RegisteredModel(
        tenant_id=tenant_id,
        id=model_id,
        context_window_tokens=1000,
        max_output_tokens=100,
        accepts_data_blocks=True,
        provider_kind="local",
    )


async def test_rows_from_before_tenants_are_the_default_tenants(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    try:
        async with unit_of_work(factory) as db:
            sid = (await SessionRepository(db).add(new_agent_session())).id
            await ModelRepository(db).put(_model("default", "old-model"))
            await ModelRepository(db).put(_model("tenant-x", "theirs"))
        await _downgrade_to(engine, BEFORE)
        assert "tenant_id" not in await _columns(engine, "sessions")
        assert "tenant_id" not in await _columns(engine, "models")
        await upgrade_to_head(empty_database_url)
    finally:
        await engine.dispose()

    settings = make_settings(empty_database_url, api_keys=[ADMIN_KEY])
    async for api in client_for(settings):
        assert (await api.get(f"/v1/sessions/{sid}", headers=ADMIN)).status_code == 200
        listed = await api.get("/v1/sessions", headers=ADMIN)
        assert [s["id"] for s in listed.json()["sessions"]] == [sid]
        assert (await api.get("/v1/models/old-model", headers=ADMIN)).status_code == 200
        # Another tenant's model could not be kept in one namespace: the downgrade dropped it.
        assert (await api.get("/v1/models/theirs", headers=ADMIN)).status_code == 404
        other = bearer((await issue_key(api, "tenant-x"))["key"])
        assert (await api.get(f"/v1/sessions/{sid}", headers=other)).status_code == 404
        assert (await api.get("/v1/models/old-model", headers=other)).status_code == 404
