"""A provider ``base_url`` the HTTP adapters cannot send to is refused when the model is
registered (422 ``invalid_base_url``, nothing stored), and a row stored before that check fails
its turns with the same sentence — never an internal error (a port out of range, an unclosed
IPv6 bracket and credentials in the URL all used to end in a 500 or a misleading retry)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import RegisteredModel
from tests.api.helpers import new_session
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream

pytestmark = pytest.mark.anyio


def http_model(base_url: str, kind: str = "openai_chat") -> dict[str, Any]:
    return {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": kind, "base_url": base_url, "model_name": "m1"},
    }


# The schema's pattern states what it can (``invalid_request``); a port out of range or 0 and
# a malformed IPv6 literal are the service's to refuse (``invalid_base_url``, with what is wrong).
@pytest.mark.parametrize(
    ("base_url", "code", "says"),
    [
        ("http://user:secret@127.0.0.1:9/v1", "invalid_request", None),
        ("https://:secret@api.example.com/v1", "invalid_request", None),
        ("ftp://127.0.0.1/v1", "invalid_request", None),
        ("127.0.0.1:8000/v1", "invalid_request", None),
        ("http://", "invalid_request", None),
        ("not a url", "invalid_request", None),
        ("http://api.example.com/v1?api-version=1", "invalid_request", None),
        ("http://api.example.com/v1#x", "invalid_request", None),
        ("http://[::1/v1", "invalid_base_url", "is not a valid URL"),
        ("http://127.0.0.1:65536/v1", "invalid_base_url", "is not a valid URL"),  # one over
        ("http://127.0.0.1:0/v1", "invalid_base_url", "names port 0"),
        ("http://:8080/v1", "invalid_base_url", "is not an absolute http:// or https:// URL"),
        ("http://api.exa\x01mple.com/v1", "invalid_base_url", "contains whitespace or control"),
    ],
)
async def test_an_unusable_base_url_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, base_url: str, code: str, says: str | None
) -> None:
    kept = await api.put("/v1/models/url-bot", json=http_model("http://127.0.0.1:1/v1"))
    assert kept.status_code in (200, 201), kept.text

    for kind in ("openai_chat", "anthropic_messages"):
        refused = await api.put("/v1/models/url-bot", json=http_model(base_url, kind))
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["code"] == code
        if says is not None:
            assert problem["detail"].startswith(f"provider.base_url {says}")
            assert problem["field"] == "provider.base_url"
    stored = (await api.get("/v1/models/url-bot")).json()
    assert stored["provider"]["base_url"] == "http://127.0.0.1:1/v1"
    assert stored["provider"]["kind"] == "openai_chat"


@pytest.mark.parametrize(
    "base_url",
    [
        "https://api.openai.com/v1",
        "http://127.0.0.1:65535/v1",  # the highest port
        "http://[::1]:8080/v1",
        "HTTPS://API.EXAMPLE.COM",
        "http://localhost:11434/v1/",
    ],
)
async def test_a_usable_base_url_is_stored_as_given(api: httpx.AsyncClient, base_url: str) -> None:
    response = await api.put("/v1/models/url-ok", json=http_model(base_url))
    assert response.status_code in (200, 201), response.text
    assert response.json()["provider"]["base_url"] == base_url


async def test_offline_kinds_do_not_use_base_url(api: httpx.AsyncClient) -> None:
    # Registered as before the check, and its turns run: nothing is sent anywhere.
    body = {
        "context_window_tokens": 10_000,
        "max_output_tokens": 100,
        "provider": {"kind": "local", "base_url": "anything"},
    }
    registered = await api.put("/v1/models/url-local", json=body)
    assert registered.status_code in (200, 201), registered.text
    assert registered.json()["readiness"]["status"] == "ready"
    sid = await new_session(api, model_id="url-local")
    done = await api.post(
        f"/v1/sessions/{sid}/turns?wait=true",
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
    )
    assert done.json()["status"] == "completed", done.text


@pytest.mark.parametrize("bad", ["http://127.0.0.1:99999/v1", "http://[::1/v1"])
async def test_a_stored_unusable_base_url_fails_the_turn_with_what_to_fix(
    api: httpx.AsyncClient, bad: str
) -> None:
    with FakeProviderServer() as provider:
        registered = await api.put("/v1/models/url-old", json=http_model(provider.base_url + "/v1"))
        assert registered.status_code in (200, 201), registered.text
        # As a row written before registration checked the URL.
        container = api._transport.app.state.container  # type: ignore[attr-defined]
        async with unit_of_work(container.db) as db:
            await db.execute(
                update(RegisteredModel)
                .where(RegisteredModel.id == "url-old")
                .values(provider_base_url=bad)
            )
        assert (await api.get("/v1/models")).status_code == 200
        assert (await api.get("/v1/models/url-old")).json()["provider"]["base_url"] == bad
        sid = await new_session(api, model_id="url-old")

        response = await api.post(
            f"/v1/sessions/{sid}/turns?wait=true",
            json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
        )

        assert response.status_code in (200, 202), response.text
        done = response.json()
        assert done["status"] == "failed"
        assert done["outcome"]["code"] == "model_error"
        message = done["outcome"]["message"]
        assert message.startswith("model error: bad_request: cannot call model m1: ")
        assert "provider.base_url is not a valid URL" in message
        assert message.endswith("register the model again with a valid base_url")
        assert provider.requests == []  # refused before anything was sent

        # Registered again with a usable URL, the session's next turn runs.
        fixed = await api.put("/v1/models/url-old", json=http_model(provider.base_url + "/v1"))
        assert fixed.status_code == 200, fixed.text
        provider.enqueue(StreamReply(openai_stream(text=["fixed"])))
        again = await api.post(
            f"/v1/sessions/{sid}/turns?wait=true",
            json={"client_request_id": "r2", "input": [{"type": "text", "text": "again"}]},
        )
        assert again.json()["outcome"] == {"final_text": "fixed"}, again.text
