"""Two tenants cannot see or touch each other's sessions and models (``docs/security.md``):
every route under another tenant's session answers 404 ``session_not_found``, as for a session
that does not exist, and changes nothing; models live in one namespace per tenant."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.api.helpers import session_body
from tests.tenancy.conftest import ADMIN, bearer, fresh, issue_key

pytestmark = pytest.mark.anyio


def session_operations() -> list[tuple[str, str]]:
    """(method, path template) of every operation under one session, the context map's parts
    included."""
    app = create_app(Settings(migrate_on_start=False, _env_file=None))
    documented = [
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if "{session_id}" in path
        for method in operations
    ]
    parts = [
        ("GET", "/ui/parts/sessions/{session_id}"),
        ("GET", "/ui/parts/sessions/{session_id}/compactions/{compaction_id}"),
    ]
    return documented + parts


def test_the_probe_covers_everything_under_a_session() -> None:
    paths = {path for _, path in session_operations()}
    for word in ("messages", "turns", "events", "compactions", "pins", "items", "context"):
        assert any(f"/{word}" in p for p in paths), word


async def _tenant_session(api: httpx.AsyncClient, key: str) -> dict[str, str]:
    """A session of the key's tenant with messages, a pin and a finished turn; its ids."""
    headers = bearer(key)
    model = await api.put(
        "/v1/models/scripted-own",
        json={
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {"kind": "scripted", "script": [{"text": "done"}]},
        },
        headers=headers,
    )
    assert model.status_code == 201, model.text
    created = await api.post(
        "/v1/sessions", json=session_body(model_id="scripted-own"), headers=headers
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    pin = await api.post(
        f"/v1/sessions/{sid}/pins",
        json={"kind": "fact", "text": "The sky is blue."},
        headers=headers,
    )
    assert pin.status_code == 201, pin.text
    turn = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "c-1", "input": [{"type": "text", "text": "go"}]},
        headers=headers,
    )
    assert turn.status_code in (200, 202), turn.text
    assert turn.json()["status"] == "completed", turn.text
    return {
        "session_id": sid,
        "turn_id": turn.json()["turn_id"],
        "pin_id": pin.json()["pin_id"],
        "compaction_id": "cmp-unknown",
        "proposal_id": "prp-unknown",
    }


async def _snapshot(api: httpx.AsyncClient, key: str, sid: str) -> dict[str, Any]:
    headers = bearer(key)
    reads = {}
    for what in ("", "/messages", "/pins", "/turns", "/compactions"):
        response = await api.get(f"/v1/sessions/{sid}{what}", headers=headers)
        assert response.status_code == 200, response.text
        reads[what] = response.json()
    return reads


async def test_another_tenant_gets_404_everywhere_under_a_session(
    keyed_api: httpx.AsyncClient,
) -> None:
    a = (await issue_key(keyed_api, fresh("tenant-a")))["key"]
    b = (await issue_key(keyed_api, fresh("tenant-b")))["key"]
    ids = await _tenant_session(keyed_api, a)
    before = await _snapshot(keyed_api, a, ids["session_id"])

    for method, template in session_operations():
        path = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: ids[m.group(1)], template)
        body = None if method in ("GET", "DELETE") else {}
        for key in (b, ADMIN["Authorization"].removeprefix("Bearer ")):
            response = await keyed_api.request(method, path, json=body, headers=bearer(key))
            assert response.status_code == 404, (method, path, response.text)
            if path.startswith("/v1"):
                assert response.json()["code"] == "session_not_found", (method, path)
                # Word for word what a session that does not exist answers.
                assert ids["session_id"] in response.json()["detail"]

    listed = await keyed_api.get("/v1/sessions", headers=bearer(b))
    assert listed.json()["sessions"] == []
    assert await _snapshot(keyed_api, a, ids["session_id"]) == before
    mine = await keyed_api.get("/v1/sessions", headers=bearer(a))
    assert [s["id"] for s in mine.json()["sessions"]] == [ids["session_id"]]


async def test_a_missing_session_and_another_tenants_read_the_same(
    keyed_api: httpx.AsyncClient,
) -> None:
    a = (await issue_key(keyed_api, fresh("tenant-a")))["key"]
    b = (await issue_key(keyed_api, fresh("tenant-b")))["key"]
    sid = (await keyed_api.post("/v1/sessions", json=session_body(), headers=bearer(a))).json()[
        "id"
    ]
    theirs = await keyed_api.get(f"/v1/sessions/{sid}", headers=bearer(b))
    missing_id = "ses-" + "0" * 32
    missing = await keyed_api.get(f"/v1/sessions/{missing_id}", headers=bearer(b))
    assert theirs.status_code == missing.status_code == 404
    strip = lambda r: {k: v for k, v in r.json().items() if k != "detail"}  # noqa: E731
    assert strip(theirs) == strip(missing)
    assert theirs.json()["detail"].replace(sid, missing_id) == missing.json()["detail"]


async def test_models_belong_to_the_tenant_that_registered_them(
    keyed_api: httpx.AsyncClient,
) -> None:
    a = bearer((await issue_key(keyed_api, fresh("tenant-a")))["key"])
    b = bearer((await issue_key(keyed_api, fresh("tenant-b")))["key"])
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "local"},
    }
    assert (await keyed_api.put("/v1/models/private-m", json=body, headers=a)).status_code == 201

    # B neither sees it, nor reads, deletes or uses it.
    listed = await keyed_api.get("/v1/models", headers=b)
    assert "private-m" not in {m["id"] for m in listed.json()}
    read = await keyed_api.get("/v1/models/private-m", headers=b)
    assert (read.status_code, read.json()["code"]) == (404, "model_not_found")
    gone = await keyed_api.delete("/v1/models/private-m", headers=b)
    assert (gone.status_code, gone.json()["code"]) == (404, "model_not_found")
    used = await keyed_api.post("/v1/sessions", json=session_body(model_id="private-m"), headers=b)
    assert (used.status_code, used.json()["code"]) == (422, "unknown_model_id")
    prepared = await keyed_api.post(
        "/v1/tokens/count",
        json={"prepare": {"model_id": "private-m", "system_context": [], "conversation": []}},
        headers=b,
    )
    assert prepared.status_code == 422, prepared.text

    # B's own model of the same id is B's: A's stays as it was.
    b_body = {**body, "max_output_tokens": 500}
    assert (await keyed_api.put("/v1/models/private-m", json=b_body, headers=b)).status_code == 201
    assert (await keyed_api.get("/v1/models/private-m", headers=a)).json()[
        "max_output_tokens"
    ] == 1000
    assert (await keyed_api.get("/v1/models/private-m", headers=b)).json()[
        "max_output_tokens"
    ] == 500
    assert (await keyed_api.delete("/v1/models/private-m", headers=b)).status_code == 204
    assert (await keyed_api.get("/v1/models/private-m", headers=a)).status_code == 200


async def test_shared_models_are_seen_by_every_tenant_and_managed_by_admins(
    keyed_api: httpx.AsyncClient,
) -> None:
    a = bearer((await issue_key(keyed_api, fresh("tenant-a")))["key"])
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "local"},
    }
    refused = await keyed_api.put("/v1/admin/models/shared-m", json=body, headers=a)
    assert (refused.status_code, refused.json()["code"]) == (403, "admin_scope_required")
    shared = await keyed_api.put("/v1/admin/models/shared-m", json=body, headers=ADMIN)
    assert shared.status_code == 201, shared.text

    assert (await keyed_api.get("/v1/models/shared-m", headers=a)).status_code == 200
    session = await keyed_api.post(
        "/v1/sessions", json=session_body(model_id="shared-m"), headers=a
    )
    assert session.status_code == 201, session.text
    # A tenant cannot delete a shared model, and an admin cannot while a session uses it.
    assert (await keyed_api.delete("/v1/models/shared-m", headers=a)).status_code == 404
    in_use = await keyed_api.delete("/v1/admin/models/shared-m", headers=ADMIN)
    assert (in_use.status_code, in_use.json()["code"]) == (409, "model_in_use")
    # Once no session names it, it goes (and leaves no shared model to other tests).
    moved = await keyed_api.patch(
        f"/v1/sessions/{session.json()['id']}",
        json={"model_id": "local", "summary_model_id": "local"},
        headers=a,
    )
    assert moved.status_code == 200, moved.text
    assert (await keyed_api.delete("/v1/admin/models/shared-m", headers=ADMIN)).status_code == 204
    assert (await keyed_api.get("/v1/models/shared-m", headers=a)).status_code == 404
