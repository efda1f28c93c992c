"""The key comes before the body (spec §8): without a valid key, a body is not looked at — not
its size, not its encoding, not its JSON — and the answer is 401 ``unauthorized``; with the key,
the body's own refusals answer as before. Both engines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

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
