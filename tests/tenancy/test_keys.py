"""Keys made, listed, rotated and revoked through the admin API; stored only as digests; the
configured-key and no-key set-ups work as before tenants (``docs/security.md``)."""

from __future__ import annotations

import hashlib

import httpx
import pytest
import sqlalchemy as sa

from app.storage.database import create_engine
from tests.api.helpers import session_body
from tests.conftest import client_for, make_settings
from tests.tenancy.conftest import ADMIN, ADMIN_KEY, bearer, fresh, issue_key

pytestmark = pytest.mark.anyio


async def test_admin_makes_lists_rotates_and_revokes_keys(keyed_api: httpx.AsyncClient) -> None:
    tenant = fresh("tenant-a")
    issued = await issue_key(keyed_api, tenant, name="ci runner")
    old_key = issued["key"]
    assert (issued["tenant_id"], issued["scope"]) == (tenant, "tenant")
    assert old_key.startswith(issued["prefix"])
    assert len(old_key) > len(issued["prefix"]) + 20
    assert (await keyed_api.get("/v1/sessions", headers=bearer(old_key))).status_code == 200

    listed = (await keyed_api.get(f"/v1/admin/keys?tenant_id={tenant}", headers=ADMIN)).json()[
        "keys"
    ]
    assert [(k["id"], k["name"], k["revoked_at"]) for k in listed] == [
        (issued["id"], "ci runner", None)
    ]
    assert all("key" not in k for k in listed)

    rotated = await keyed_api.post(f"/v1/admin/keys/{issued['id']}/rotate", headers=ADMIN)
    assert rotated.status_code == 201, rotated.text
    new = rotated.json()
    assert (new["tenant_id"], new["scope"], new["name"]) == (tenant, "tenant", "ci runner")
    assert new["key"] != old_key
    # Both work until the old one is revoked: callers switch without a gap.
    sid = (
        await keyed_api.post("/v1/sessions", json=session_body(), headers=bearer(old_key))
    ).json()["id"]
    assert (
        await keyed_api.get(f"/v1/sessions/{sid}", headers=bearer(new["key"]))
    ).status_code == 200

    revoked = await keyed_api.delete(f"/v1/admin/keys/{issued['id']}", headers=ADMIN)
    assert revoked.status_code == 204
    after = await keyed_api.get(f"/v1/sessions/{sid}", headers=bearer(old_key))
    assert (after.status_code, after.json()["code"]) == (401, "unauthorized")
    assert (
        await keyed_api.get(f"/v1/sessions/{sid}", headers=bearer(new["key"]))
    ).status_code == 200
    again = await keyed_api.delete(f"/v1/admin/keys/{issued['id']}", headers=ADMIN)
    assert (again.status_code, again.json()["code"]) == (404, "key_not_found")
    shown = (await keyed_api.get(f"/v1/admin/keys?tenant_id={tenant}", headers=ADMIN)).json()
    assert {k["id"]: k["revoked_at"] is not None for k in shown["keys"]} == {
        issued["id"]: True,
        new["id"]: False,
    }
    gone = await keyed_api.post(f"/v1/admin/keys/{issued['id']}/rotate", headers=ADMIN)
    assert (gone.status_code, gone.json()["code"]) == (404, "key_not_found")
    unknown = await keyed_api.delete("/v1/admin/keys/key-nothing", headers=ADMIN)
    assert (unknown.status_code, unknown.json()["code"]) == (404, "key_not_found")


async def test_only_admin_keys_manage_keys(keyed_api: httpx.AsyncClient) -> None:
    tenant = bearer((await issue_key(keyed_api, fresh("tenant-a")))["key"])
    for method, path in (
        ("GET", "/v1/admin/keys"),
        ("POST", "/v1/admin/keys"),
        ("POST", "/v1/admin/keys/key-x/rotate"),
        ("DELETE", "/v1/admin/keys/key-x"),
        ("DELETE", "/v1/admin/models/m"),
    ):
        body = {"tenant_id": "someone"} if method == "POST" else None
        response = await keyed_api.request(method, path, json=body, headers=tenant)
        assert (response.status_code, response.json()["code"]) == (403, "admin_scope_required")
    # An admin-scope key of another tenant may.
    admin_b = bearer((await issue_key(keyed_api, fresh("tenant-b"), scope="admin"))["key"])
    assert (await keyed_api.get("/v1/admin/keys", headers=admin_b)).status_code == 200


async def test_a_bad_tenant_id_is_refused(keyed_api: httpx.AsyncClient) -> None:
    for tenant_id in ("", "Upper", "*", "a" * 64, "with space"):
        response = await keyed_api.post(
            "/v1/admin/keys", json={"tenant_id": tenant_id}, headers=ADMIN
        )
        assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
    listed = await keyed_api.get("/v1/admin/keys", headers=ADMIN)
    assert {k["tenant_id"] for k in listed.json()["keys"]}.isdisjoint({"", "Upper", "*"})


async def test_keys_are_stored_as_digests(database_url: str) -> None:
    async for api in client_for(make_settings(database_url, api_keys=[ADMIN_KEY])):
        issued = [await issue_key(api, fresh(f"tenant-{i}")) for i in range(3)]
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            every = (await connection.execute(sa.text("SELECT * FROM api_keys"))).mappings().all()
    finally:
        await engine.dispose()
    rows = [r for r in every if r["id"] in {k["id"] for k in issued}]
    assert len(rows) == 3
    stored = " ".join(str(v) for row in rows for v in row.values())
    for key in issued:
        assert key["key"] not in stored
        digest = hashlib.sha256(key["key"].encode()).hexdigest()
        assert [r["digest"] for r in rows if r["id"] == key["id"]] == [digest]
    assert ADMIN_KEY not in stored


async def test_the_configured_key_works_as_before(keyed_api: httpx.AsyncClient) -> None:
    """One configured key: every session and model is the default tenant's, as before."""
    sid = (await keyed_api.post("/v1/sessions", json=session_body(), headers=ADMIN)).json()["id"]
    assert (await keyed_api.get(f"/v1/sessions/{sid}", headers=ADMIN)).status_code == 200
    listed = await keyed_api.get("/v1/sessions", headers=ADMIN)
    assert listed.json()["sessions"][0]["id"] == sid  # newest first
    body = {"context_window_tokens": 1000, "max_output_tokens": 100, "provider": {"kind": "local"}}
    assert (await keyed_api.put("/v1/models/mine", json=body, headers=ADMIN)).status_code == 201
    assert (await keyed_api.delete("/v1/models/mine", headers=ADMIN)).status_code == 204
    assert (await keyed_api.get("/v1/sessions")).status_code == 401
    wrong = await keyed_api.get("/v1/sessions", headers=bearer("wrong-0123456789abcdef"))
    assert wrong.status_code == 401


async def test_no_key_works_as_before(api: httpx.AsyncClient) -> None:
    """No keys configured: open, every request the default tenant (and its admin)."""
    sid = (await api.post("/v1/sessions", json=session_body())).json()["id"]
    assert (await api.get(f"/v1/sessions/{sid}")).status_code == 200
    assert (await api.get(f"/v1/sessions/{sid}", headers=bearer("anything"))).status_code == 200
    assert (await api.get("/v1/sessions")).json()["sessions"][0]["id"] == sid
    assert (await api.get("/v1/admin/keys")).status_code == 200
