"""What the compatible endpoints refuse before anything is stored or sent (spec §21.4), through
the app itself: the caller's own provider key while the operator has not allowed it, and keys
the service does not know. Each refusal is in the protocol's error shape."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

BODY = {"model": "local", "messages": [{"role": "user", "content": "hi"}]}


async def test_a_callers_own_provider_key_is_refused_unless_allowed(api: httpx.AsyncClient) -> None:
    before = (await api.get("/v1/sessions")).json()["sessions"]
    response = await api.post(
        "/v1/compat/openai/chat/completions",
        json=BODY,
        headers={"X-Ctxsvc-Provider-Key": "sk-own"},
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "caller_keys_disabled"
    assert "CTXSVC_PROXY_CALLER_KEYS" in error["message"]
    assert "sk-own" not in response.text
    after = (await api.get("/v1/sessions")).json()["sessions"]
    assert after == before  # nothing stored


async def test_the_local_model_answers_through_the_chat_endpoint(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/compat/openai/chat/completions", json=BODY)
    assert response.status_code == 200, response.text
    assert response.json()["object"] == "chat.completion"
    sid = response.headers["x-ctxsvc-session-id"]
    session = (await api.get(f"/v1/sessions/{sid}")).json()
    assert (session["origin"], session["forked_from"]) == ("proxy:openai_chat", None)


async def test_the_context_map_shows_a_proxied_session_its_origin_and_fork(
    api: httpx.AsyncClient,
) -> None:
    first = await api.post("/v1/compat/openai/chat/completions", json=BODY)
    sid = first.headers["x-ctxsvc-session-id"]
    # The same first request again: a retry of it, so a fork of the session it made.
    again = await api.post("/v1/compat/openai/chat/completions", json=BODY)
    fork = again.headers["x-ctxsvc-session-id"]
    assert again.headers["x-ctxsvc-forked-from"] == sid
    page = await api.get(f"/ui/sessions/{fork}")
    assert page.status_code == 200
    assert "proxy:openai_chat" in page.text
    assert f'href="/ui/sessions/{sid}"' in page.text
    listing = (await api.get("/ui")).text
    row = listing.split(f'data-session="{fork}"', 1)[1].split("</tr>", 1)[0]
    assert "proxy:openai_chat" in row
    assert f'forked from <a class="mono" href="/ui/sessions/{sid}"' in row


KEY = "key-of-the-compat-refusals-7a1e"


@pytest.fixture
async def keyed(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url, api_keys=[KEY])):
        yield client


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/compat/openai/chat/completions", {}),
        ("/v1/compat/openai/responses", {"authorization": "Bearer not-the-key"}),
        ("/v1/compat/anthropic/v1/messages", {"x-api-key": "not-the-key"}),
    ],
)
async def test_without_the_key_no_body_is_looked_at_and_the_refusal_is_the_protocols(
    keyed: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> None:
    # Over the tests' body limit: read, it would be a 413.
    response = await keyed.post(path, content=b"x" * 2_000_001, headers=headers)
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["code"] == "unauthorized"
    if "anthropic" in path:
        assert response.json()["type"] == "error"
        assert error["type"] == "authentication_error"
    else:
        assert error["type"] == "authentication_error"


@pytest.mark.parametrize("header", ["authorization", "x-api-key"])
async def test_the_service_key_is_taken_as_bearer_or_x_api_key(
    keyed: httpx.AsyncClient, header: str
) -> None:
    value = f"Bearer {KEY}" if header == "authorization" else KEY
    response = await keyed.post(
        "/v1/compat/anthropic/v1/messages",
        json={"model": "local", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]},
        headers={header: value},
    )
    assert response.status_code == 200, response.text
    assert response.json()["type"] == "message"


async def test_a_refusal_in_the_protocols_shape_names_its_code_in_the_access_line(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxsvc.access")
    response = await api.post(
        "/v1/compat/openai/chat/completions", json={**BODY, "temperature": "warm"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_sampling"
    (line,) = [r for r in caplog.records if r.name == "ctxsvc.access"]
    fields = line.__dict__["fields"]
    assert (line.getMessage(), fields["status"], fields["code"]) == (
        "request refused",
        400,
        "invalid_sampling",
    )
