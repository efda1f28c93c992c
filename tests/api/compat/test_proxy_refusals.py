"""What the compatible endpoints refuse before anything is stored or sent (spec §21.4), through
the app itself: the caller's own provider key while the operator has not allowed it, and keys
the service does not know. Each refusal is in the protocol's error shape."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio

BODY = {"model": "local", "messages": [{"role": "user", "content": "hi"}]}


async def test_a_callers_own_provider_key_is_refused_unless_allowed(api: httpx.AsyncClient) -> None:
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
    sessions = (await api.get("/v1/sessions")).json()["sessions"]
    assert sessions == []  # nothing stored


async def test_the_local_model_answers_through_the_chat_endpoint(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/compat/openai/chat/completions", json=BODY)
    assert response.status_code == 200, response.text
    assert response.json()["object"] == "chat.completion"
    sid = response.headers["x-ctxsvc-session-id"]
    session = (await api.get(f"/v1/sessions/{sid}")).json()
    assert (session["origin"], session["forked_from"]) == ("proxy:openai_chat", None)
