"""The stateless body's inline ``model.model_name`` and the ``model`` key of ``provider_payload``.

An encoded payload is "the exact body" only if it names the provider's model (OpenAI and
Anthropic both require ``model``): it does whenever a name is known, inline or registered.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.api.schemas.models import MODEL_NAME_MAX_LENGTH

pytestmark = pytest.mark.anyio

PROTOCOLS = ["openai_chat", "anthropic_messages"]


def body(model: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "system_context": [{"key": "agent", "content": [{"type": "text", "text": "agent"}]}],
        "conversation": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "model": {"context_window_tokens": 1000, "max_output_tokens": 400, **(model or {})},
    }
    payload.update(overrides)
    return payload


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_inline_model_name_is_the_payloads_model(
    stateless_client: httpx.AsyncClient, protocol: str
) -> None:
    response = await stateless_client.post(
        "/v1/prepare", json=body({"model_name": "gpt-5-mini"}, encode=protocol)
    )
    assert response.status_code == 200, response.text
    payload = response.json()["provider_payload"]
    assert payload["model"] == "gpt-5-mini"
    # The name is the provider's business only: the budget is the same as without it.
    unnamed = await stateless_client.post("/v1/prepare", json=body(encode=protocol))
    assert unnamed.json()["budget"] == response.json()["budget"]
    assert "model" not in unnamed.json()["provider_payload"]  # no name known: none invented


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_registered_models_provider_name_is_the_payloads_model(
    stateless_client: httpx.AsyncClient, protocol: str
) -> None:
    registered = await stateless_client.put(
        "/v1/models/house-model",
        json={
            "context_window_tokens": 8000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "openai_chat",
                "base_url": "http://127.0.0.1:9/v1",
                "model_name": "qwen3:8b",
            },
        },
    )
    assert registered.status_code == 201, registered.text
    payload = body(model_id="house-model", encode=protocol)
    del payload["model"]
    response = await stateless_client.post("/v1/prepare", json=payload)
    assert response.status_code == 200, response.text
    assert response.json()["provider_payload"]["model"] == "qwen3:8b"


@pytest.mark.parametrize(
    ("name", "status"),
    [("m" * MODEL_NAME_MAX_LENGTH, 200), ("m" * (MODEL_NAME_MAX_LENGTH + 1), 422), ("", 422)],
)
async def test_the_inline_model_name_is_bounded(
    stateless_client: httpx.AsyncClient, name: str, status: int
) -> None:
    response = await stateless_client.post(
        "/v1/prepare", json=body({"model_name": name}, encode="openai_chat")
    )
    assert response.status_code == status, response.text
    if status == 200:
        assert response.json()["provider_payload"]["model"] == name
    else:
        assert response.json()["code"] == "invalid_request"
        assert "model_name" in response.json()["detail"]


async def test_a_registered_models_body_does_not_take_model_name_beside_its_provider(
    stateless_client: httpx.AsyncClient,
) -> None:
    # The provider's name belongs in ``provider.model_name`` there; a second place would let
    # the two disagree.
    response = await stateless_client.put(
        "/v1/models/x",
        json={
            "context_window_tokens": 8000,
            "max_output_tokens": 1000,
            "model_name": "gpt-5",
            "provider": {"kind": "local"},
        },
    )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
