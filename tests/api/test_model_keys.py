"""Models with and without API keys, against a real provider on loopback.

- A model without ``api_key_env`` (a local Ollama, vLLM or llama.cpp) is called with no
  authentication header and its turns work.
- A model whose ``api_key_env`` names a variable that is not set says so when it is registered
  and whenever it is read (``readiness``), and its turns fail with the same sentence, before
  anything is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session
from tests.providers.fakes import (
    FakeProviderServer,
    StreamReply,
    anthropic_stream,
    openai_error,
    openai_stream,
)

pytestmark = pytest.mark.anyio

READY = {"status": "ready", "code": None, "detail": None}
UNSET = "CTXSVC_TEST_UNSET_PROVIDER_KEY"


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


def model_body(server: FakeProviderServer, kind: str, **provider: Any) -> dict[str, Any]:
    base_url = server.base_url + ("/v1" if kind == "openai_chat" else "")
    return {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": kind, "base_url": base_url, "model_name": "qwen3:8b", **provider},
    }


async def register(api: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    model_id = f"house-{uuid.uuid4().hex[:8]}"
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    return model_id, response.json()


async def turn(api: httpx.AsyncClient, model_id: str) -> dict[str, Any]:
    sid = await new_session(api, model_id=model_id)
    response = await api.post(
        f"/v1/sessions/{sid}/turns?wait=true",
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
    )
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


@pytest.mark.parametrize(
    ("kind", "reply", "auth_header"),
    [
        ("openai_chat", openai_stream(text=["hi there"]), "authorization"),
        ("anthropic_messages", anthropic_stream(text=["hi there"]), "x-api-key"),
    ],
)
async def test_a_model_without_a_key_is_called_without_one(
    api: httpx.AsyncClient,
    provider: FakeProviderServer,
    kind: str,
    reply: Any,
    auth_header: str,
) -> None:
    model_id, registered = await register(api, model_body(provider, kind))
    assert registered["readiness"] == READY
    provider.enqueue(StreamReply(reply))

    done = await turn(api, model_id)

    assert done["status"] == "completed", done
    assert done["outcome"] == {"final_text": "hi there"}
    (request,) = provider.requests
    assert auth_header not in request.headers
    assert "authorization" not in request.headers
    assert request.json()["model"] == "qwen3:8b"


async def test_a_keyless_model_whose_server_wants_a_key_says_to_name_one(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    model_id, _ = await register(api, model_body(provider, "openai_chat"))
    provider.enqueue(openai_error(401, "missing bearer token", type="invalid_request_error"))

    done = await turn(api, model_id)

    assert done["status"] == "failed"
    assert done["outcome"]["code"] == "model_error"
    assert done["outcome"]["message"] == (
        "model error: auth: the provider asks for an API key (HTTP 401) and model qwen3:8b has "
        "none; set api_key_env in the model's provider settings to the name of the environment "
        "variable that holds it"
    )


async def test_a_missing_key_variable_is_reported_at_registration_and_on_every_read(
    api: httpx.AsyncClient, provider: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(UNSET, raising=False)
    sentence = (
        f"the environment variable {UNSET} named by api_key_env is not set in the service's "
        "environment; export it where ctxsvc runs and restart, or remove api_key_env if the "
        "server needs no key"
    )
    not_ready = {
        "status": "not_ready",
        "code": "api_key_missing",
        "detail": f"calls to this model will fail: {sentence}",
    }
    model_id, registered = await register(
        api, model_body(provider, "openai_chat", api_key_env=UNSET)
    )
    assert registered["readiness"] == not_ready
    assert (await api.get(f"/v1/models/{model_id}")).json()["readiness"] == not_ready
    listed = {m["id"]: m for m in (await api.get("/v1/models")).json()}
    assert listed[model_id]["readiness"] == not_ready

    done = await turn(api, model_id)
    assert done["status"] == "failed"
    assert done["outcome"] == {
        "code": "model_error",
        "message": f"model error: auth: cannot call model qwen3:8b: {sentence}",
    }
    assert provider.requests == []  # refused before anything was sent

    # Blank is not a key either; a real value makes the model ready, with no re-registration.
    monkeypatch.setenv(UNSET, "   ")
    assert (await api.get(f"/v1/models/{model_id}")).json()["readiness"] == not_ready
    monkeypatch.setenv(UNSET, "sk-now-set")
    assert (await api.get(f"/v1/models/{model_id}")).json()["readiness"] == READY


async def test_catalogue_models_say_whether_their_key_is_there(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    listed = {m["id"]: m["readiness"] for m in (await api.get("/v1/models")).json()}
    assert listed["gpt-5"]["code"] == "api_key_missing"
    assert "OPENAI_API_KEY" in listed["gpt-5"]["detail"]
    assert listed["claude-haiku-4-5"] == READY
    assert listed["local"] == READY  # the offline kinds need no key


@pytest.mark.parametrize("pasted", ["sk-live-abc\nsk-live-def", "sk-live-abc\rx", "sk-\x7flive"])
async def test_a_key_variable_no_header_can_carry_says_so_and_sends_nothing(
    api: httpx.AsyncClient,
    provider: FakeProviderServer,
    monkeypatch: pytest.MonkeyPatch,
    pasted: str,
) -> None:
    # A line break pasted inside the key (one at either end is stripped, as before): aiohttp
    # refuses such a header, which used to fail the turn as an internal error.
    monkeypatch.setenv(UNSET, pasted)
    sentence = (
        f"the environment variable {UNSET} named by api_key_env holds a control character (a "
        "line break, say) inside the key, which no HTTP header can carry; set it to the key "
        "alone where ctxsvc runs and restart"
    )
    model_id, registered = await register(
        api, model_body(provider, "openai_chat", api_key_env=UNSET)
    )
    assert registered["readiness"] == {
        "status": "not_ready",
        "code": "api_key_invalid",
        "detail": f"calls to this model will fail: {sentence}",
    }

    done = await turn(api, model_id)

    assert done["status"] == "failed"
    assert done["outcome"] == {
        "code": "model_error",
        "message": f"model error: auth: cannot call model qwen3:8b: {sentence}",
    }
    assert "sk-" not in done["outcome"]["message"]
    assert provider.requests == []


async def test_a_key_with_a_line_break_at_either_end_is_used_stripped(
    api: httpx.AsyncClient, provider: FakeProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UNSET, "\nsk-live-abc\r\n")
    model_id, registered = await register(
        api, model_body(provider, "openai_chat", api_key_env=UNSET)
    )
    assert registered["readiness"] == READY
    provider.enqueue(StreamReply(openai_stream(text=["hi"])))

    done = await turn(api, model_id)

    assert done["outcome"] == {"final_text": "hi"}, done
    (request,) = provider.requests
    assert request.headers["authorization"] == "Bearer sk-live-abc"
