"""The key comes before the body (spec §8): without a valid key, a body is not looked at — not
its size, not its encoding, not its JSON — and the answer is 401 ``unauthorized``; with the key,
the body's own refusals answer as before. Both engines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import Depends, FastAPI

from app.api.auth import refuse_unknown_key, require_admin
from app.api.key_first import KeyBeforeBody
from tests.api.helpers import session_body
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

KEY = "key-before-body-in-process-5d2c"
JSON = {"content-type": "application/json"}
BAD_BODIES = [
    (b'{"text": "a\xed\xa0\x80"}', 400, "malformed_json"),  # an encoded surrogate
    (b"{not json", 400, "malformed_json"),
    (b"[" * 10 + b"]" * 10, 422, "invalid_request"),
    (b"x" * 2_000_001, 413, "request_too_large"),  # over the tests' body limit
]


@pytest.fixture
async def keyed(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url, api_keys=[KEY])):
        yield client


@pytest.mark.parametrize(("body", "status", "code"), BAD_BODIES)
@pytest.mark.parametrize("authorization", [None, "Bearer not-the-key"])
async def test_without_the_key_no_body_is_looked_at(
    keyed: httpx.AsyncClient, body: bytes, status: int, code: str, authorization: str | None
) -> None:
    headers = dict(JSON, **({"authorization": authorization} if authorization else {}))
    response = await keyed.post("/v1/tokens/count", content=body, headers=headers)
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("body", "status", "code"), BAD_BODIES)
async def test_with_the_key_the_body_is_judged_as_before(
    keyed: httpx.AsyncClient, body: bytes, status: int, code: str
) -> None:
    headers = dict(JSON, authorization=f"Bearer {KEY}")
    response = await keyed.post("/v1/tokens/count", content=body, headers=headers)
    assert response.status_code == status, response.text
    assert response.json()["code"] == code


async def test_nothing_is_stored_for_a_refused_key(keyed: httpx.AsyncClient) -> None:
    auth = {"authorization": f"Bearer {KEY}"}
    before = (await keyed.get("/v1/sessions", headers=auth)).json()["sessions"]
    refused = await keyed.post("/v1/sessions", json=session_body(), headers={"authorization": ""})
    assert refused.status_code == 401
    assert (await keyed.get("/v1/sessions", headers=auth)).json()["sessions"] == before


async def test_open_routes_take_bodies_without_a_key(keyed: httpx.AsyncClient) -> None:
    # Health has no key check: a body sent to it changes nothing about the answer.
    response = await keyed.request("GET", "/healthz", content=b"{}", headers=JSON)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(("body", "status", "code"), BAD_BODIES)
@pytest.mark.parametrize("authorization", [None, "Bearer not-the-key"])
async def test_an_admin_route_refuses_a_wrong_key_before_its_body(
    keyed: httpx.AsyncClient, body: bytes, status: int, code: str, authorization: str | None
) -> None:
    """The body would be refused for what it is (its size, its encoding, its JSON): the
    wrong key is refused first, and no key is made."""
    before = await admin_keys(keyed)
    headers = dict(JSON, **({"authorization": authorization} if authorization else {}))
    response = await keyed.post("/v1/admin/keys", content=body, headers=headers)
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthorized"
    assert await admin_keys(keyed) == before  # nothing was made


async def admin_keys(api: httpx.AsyncClient) -> list[object]:
    listed = await api.get("/v1/admin/keys", headers={"authorization": f"Bearer {KEY}"})
    assert listed.status_code == 200, listed.text
    return list(listed.json()["keys"])


LIMIT = 4
WINDOW = 3600.0  # one request back every 900 s: none comes back while the test runs


@pytest.fixture
async def limited(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        database_url, api_keys=[KEY], rate_limit_requests=LIMIT, rate_limit_window_seconds=WINDOW
    )
    async for client in client_for(settings):
        yield client


async def test_a_keyed_request_with_a_body_takes_one_token(limited: httpx.AsyncClient) -> None:
    """The key check before the body takes no rate-limit token: the route's own check takes
    the one token of the request, on a plain route and an admin one alike."""
    auth = {"authorization": f"Bearer {KEY}"}
    for i in range(LIMIT):
        if i % 2:
            answer = await limited.post(
                "/v1/admin/keys", json={"tenant_id": f"t-{i}", "scope": "tenant"}, headers=auth
            )
        else:
            answer = await limited.post(
                "/v1/tokens/count", json={"counter": "estimate", "text": "hi"}, headers=auth
            )
        assert answer.is_success, (i, answer.text)
    over = await limited.post(
        "/v1/tokens/count", json={"counter": "estimate", "text": "hi"}, headers=auth
    )
    assert over.status_code == 429, over.text
    assert over.json()["code"] == "tenant_rate_limited"


def test_a_key_check_held_by_another_dependency_is_found() -> None:
    """A route that depends on ``require_admin`` alone (every /v1 route also gets
    ``require_api_key`` from its router today) still has its key checked before its body:
    the check is found however deep, and only its key half runs there."""
    app = FastAPI()

    @app.post("/admin-only", dependencies=[Depends(require_admin)])
    async def admin_only(body: dict[str, str]) -> dict[str, str]:
        return body

    @app.post("/open")
    async def open_route(body: dict[str, str]) -> dict[str, str]:
        return body

    middleware = KeyBeforeBody(app, app.routes)
    scope = {"type": "http", "method": "POST", "path": "/admin-only", "headers": []}
    found = middleware.key_check(scope)
    assert found is not None
    assert found[0] is refuse_unknown_key  # the key alone: no rate-limit token taken
    assert middleware.key_check({**scope, "path": "/open"}) is None
