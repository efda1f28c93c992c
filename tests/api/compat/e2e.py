"""What the end-to-end tests of the drop-in endpoints ask the service (fixtures: conftest)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.providers.fakes import FakeProviderServer
from tests.servers import ServerProcess

__all__ = ["KEY_ENV", "register", "session", "stored"]

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"


def register(
    server: ServerProcess,
    fake: FakeProviderServer,
    kind: str = "openai_chat",
    **capabilities: Any,
) -> str:
    """A new model id served by the fake provider, which speaks the protocol ``kind``."""
    model_id = f"fake-model-{uuid.uuid4().hex[:8]}"
    anthropic = kind == "anthropic_messages"
    body: dict[str, Any] = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": kind,
            # The OpenAI SDKs' base URLs end in ``/v1``; Anthropic's path carries its own.
            "base_url": fake.base_url if anthropic else fake.base_url + "/v1",
            "model_name": "claude-fake" if anthropic else "gpt-fake",
            "api_key_env": KEY_ENV,
        },
        **capabilities,
    }
    response = httpx.put(f"{server.url}/v1/models/{model_id}", json=body, timeout=30)
    assert response.status_code == 201, response.text
    return model_id


def stored(server: ServerProcess, session_id: str) -> list[dict[str, Any]]:
    """The session's normal messages, as the service stored them."""
    response = httpx.get(f"{server.url}/v1/sessions/{session_id}/messages", timeout=30)
    assert response.status_code == 200, response.text
    return [m for m in response.json()["messages"] if m["kind"] == "normal"]


def session(server: ServerProcess, session_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/sessions/{session_id}", timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())
