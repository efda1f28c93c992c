"""``/readyz?providers=true``: each provider of a callable model is tried over real HTTP on
loopback; a provider that is down is named with its address and the cause, and only when asked.

Each test has a database of its own (``sqlite_api``): the answer lists every registered model's
provider, and the suite's shared PostgreSQL database keeps models other tests registered at
servers long gone. The probe reads the model list through the service, the same on both engines.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.providers.fakes import FakeProviderServer

pytestmark = pytest.mark.anyio

UNSET = "CTXSVC_TEST_UNSET_PROVIDER_KEY"


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed when the block ends: nothing listens


def model_body(base_url: str, **provider: Any) -> dict[str, Any]:
    return {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "openai_chat", "base_url": base_url, "model_name": "m", **provider},
    }


async def register(api: httpx.AsyncClient, base_url: str, **provider: Any) -> str:
    model_id = f"house-{uuid.uuid4().hex[:8]}"
    response = await api.put(f"/v1/models/{model_id}", json=model_body(base_url, **provider))
    assert response.status_code == 201, response.text
    return model_id


async def test_plain_readiness_does_not_try_providers(sqlite_api: httpx.AsyncClient) -> None:
    await register(sqlite_api, f"http://127.0.0.1:{closed_port()}/v1")
    response = await sqlite_api.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_a_reachable_provider_is_listed_as_reachable(
    sqlite_api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    model_id = await register(sqlite_api, provider.base_url + "/v1")
    response = await sqlite_api.get("/readyz", params={"providers": "true"})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "ready",
        "providers": [
            {"base_url": provider.base_url + "/v1", "models": [model_id], "reachable": True}
        ],
    }
    # One GET of base_url, without a key: never a model call.
    [probe] = provider.requests
    assert (probe.method, probe.path, probe.body) == ("GET", "/v1", b"")
    assert "authorization" not in probe.headers


async def test_a_provider_that_is_down_makes_readiness_503_naming_it(
    sqlite_api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    up = await register(sqlite_api, provider.base_url + "/v1")
    port = closed_port()
    down_url = f"http://127.0.0.1:{port}/v1"
    down = await register(sqlite_api, down_url)
    response = await sqlite_api.get("/readyz", params={"providers": "true"})
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "not_ready"
    assert body["detail"] == (
        f"the connection to the provider at {down_url} failed: connection refused "
        "(ClientConnectorError)"
    )
    by_url = {entry["base_url"]: entry for entry in body["providers"]}
    assert by_url[down_url]["reachable"] is False
    assert by_url[down_url]["models"] == [down]
    assert by_url[provider.base_url + "/v1"] == {
        "base_url": provider.base_url + "/v1",
        "models": [up],
        "reachable": True,
    }


async def test_a_model_without_its_key_is_not_probed(sqlite_api: httpx.AsyncClient) -> None:
    # It cannot be called from this process anyway (readiness says why, on the model).
    await register(sqlite_api, f"http://127.0.0.1:{closed_port()}/v1", api_key_env=UNSET)
    response = await sqlite_api.get("/readyz", params={"providers": "true"})
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ready", "providers": []}
