"""Where a model's ``base_url`` may send requests (``app.providers.destinations``): link-local
and metadata addresses never; loopback and private networks only when the operator sets
``CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS``; checked at registration (422 ``base_url_not_allowed``,
nothing stored) and again on the addresses a host name resolves to when a call connects. A
failed call never quotes the bytes of whatever answered."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.providers.destinations import DestinationRefused, GuardedResolver
from app.storage.database import unit_of_work
from app.storage.models import RegisteredModel
from tests.api.helpers import new_session
from tests.conftest import client_for, make_settings
from tests.providers.fakes import BodyReply, FakeProviderServer

pytestmark = pytest.mark.anyio


def http_model(base_url: str) -> dict[str, Any]:
    return {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "openai_chat", "base_url": base_url, "model_name": "m1"},
    }


@pytest.fixture
async def strict_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The service as it starts by default: private networks not allowed."""
    settings = make_settings(database_url, allow_private_model_hosts=False)
    async for client in client_for(settings):
        yield client


ALWAYS_REFUSED = [
    "http://169.254.169.254/latest",
    "http://[fd00:ec2::254]/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://169.254.1.1:8080/v1",
    "http://[fe80::1]:8080/v1",
    "http://metadata.google.internal/v1",
    "http://0.0.0.0:8080/v1",
    "http://100.100.100.200/v1",
]
PRIVATE = [
    "http://127.0.0.1:5432/v1",
    "http://[::1]:22/v1",
    "http://localhost:11434/v1",
    "http://10.0.0.8:8000/v1",
    "http://192.168.1.20/v1",
    "http://172.16.0.1/v1",
    "http://[fc00::1]/v1",
]


@pytest.mark.parametrize("base_url", ALWAYS_REFUSED + PRIVATE)
async def test_refused_by_default_and_nothing_is_stored(
    strict_api: httpx.AsyncClient, base_url: str
) -> None:
    refused = await strict_api.put("/v1/models/ssrf-bot", json=http_model(base_url))
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "base_url_not_allowed"
    assert refused.json()["field"] == "provider.base_url"
    assert (await strict_api.get("/v1/models/ssrf-bot")).status_code == 404


async def test_a_public_host_is_allowed_by_default(strict_api: httpx.AsyncClient) -> None:
    for base_url in ("https://api.openai.com/v1", "http://8.8.8.8/v1"):
        response = await strict_api.put("/v1/models/public", json=http_model(base_url))
        assert response.status_code in (200, 201), response.text


@pytest.mark.parametrize("base_url", ALWAYS_REFUSED)
async def test_link_local_and_metadata_are_refused_even_when_private_networks_are_allowed(
    api: httpx.AsyncClient, base_url: str
) -> None:
    refused = await api.put("/v1/models/ssrf-bot", json=http_model(base_url))
    assert (refused.status_code, refused.json()["code"]) == (422, "base_url_not_allowed")


@pytest.mark.parametrize("base_url", PRIVATE)
async def test_private_networks_when_the_operator_allows_them(
    api: httpx.AsyncClient, base_url: str
) -> None:
    response = await api.put("/v1/models/local-server", json=http_model(base_url))
    assert response.status_code in (200, 201), response.text


async def _turn(api: httpx.AsyncClient, model_id: str) -> dict[str, Any]:
    sid = await new_session(api, model_id=model_id)
    response = await api.post(
        f"/v1/sessions/{sid}/turns?wait=true",
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
    )
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


async def test_a_stored_loopback_model_is_refused_when_it_calls(
    strict_api: httpx.AsyncClient,
) -> None:
    """A row stored before the rule (or while private networks were allowed) sends nothing."""
    with FakeProviderServer() as provider:
        registered = await strict_api.put("/v1/models/old", json=http_model("https://example.com"))
        assert registered.status_code == 201, registered.text
        container = strict_api._transport.app.state.container  # type: ignore[attr-defined]
        async with unit_of_work(container.db) as db:
            await db.execute(
                update(RegisteredModel)
                .where(RegisteredModel.id == "old")
                .values(provider_base_url=provider.base_url + "/v1")
            )
        done = await _turn(strict_api, "old")
        assert (done["status"], done["outcome"]["code"]) == ("failed", "model_error")
        assert "127.0.0.1 is a loopback address" in done["outcome"]["message"]
        assert provider.requests == []


def _own_host_name() -> str:
    """This machine's name, when it resolves to loopback or a private address only."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
    except OSError:
        pytest.skip(f"the host name {name!r} does not resolve here")
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    if not all(a.is_loopback or a.is_private for a in addresses):
        pytest.skip(f"the host name {name!r} resolves to a public address here")
    return name


async def test_a_host_name_is_checked_on_the_addresses_it_resolves_to(
    strict_api: httpx.AsyncClient,
) -> None:
    """Registration cannot tell what a name will resolve to; the connection can."""
    name = _own_host_name()
    with FakeProviderServer() as provider:
        port = provider.base_url.rsplit(":", 1)[1]
        registered = await strict_api.put(
            "/v1/models/by-name", json=http_model(f"http://{name}:{port}/v1")
        )
        assert registered.status_code == 201, registered.text
        done = await _turn(strict_api, "by-name")
        assert (done["status"], done["outcome"]["code"]) == ("failed", "model_error")
        assert f"{name} resolves to" in done["outcome"]["message"]
        assert provider.requests == []


async def test_the_resolver_refuses_a_name_with_any_refused_address() -> None:
    class Fixed:
        def __init__(self, *hosts: str) -> None:
            self.hosts = hosts

        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[Any]:
            return [{"host": h, "port": port, "hostname": host} for h in self.hosts]

        async def close(self) -> None:
            return None

    rebinding = GuardedResolver(allow_private=False, resolver=Fixed("93.184.216.34", "10.0.0.1"))  # type: ignore[arg-type]
    with pytest.raises(DestinationRefused, match=r"10\.0\.0\.1 is a private address"):
        await rebinding.resolve("model.example", 443)
    metadata = GuardedResolver(allow_private=True, resolver=Fixed("169.254.169.254"))  # type: ignore[arg-type]
    with pytest.raises(DestinationRefused, match="metadata"):
        await metadata.resolve("model.example", 80)
    public = GuardedResolver(allow_private=False, resolver=Fixed("93.184.216.34"))  # type: ignore[arg-type]
    assert [r["host"] for r in await public.resolve("model.example", 443)] == ["93.184.216.34"]


async def test_a_failed_call_never_quotes_what_answered(api: httpx.AsyncClient) -> None:
    """Whatever listens at base_url (a database, a metadata service) is not the caller's to
    read: the outcome says what came (status, type, size), never its bytes."""
    with FakeProviderServer() as provider:
        secret = "AccessKeyId=ASIA-NOT-FOR-CALLERS"
        provider.enqueue(BodyReply(secret, content_type="text/plain"))
        registered = await api.put("/v1/models/talker", json=http_model(provider.base_url + "/v1"))
        assert registered.status_code in (200, 201), registered.text
        done = await _turn(api, "talker")
        assert done["status"] == "failed"
        assert f"content type text/plain, {len(secret)} bytes" in done["outcome"]["message"]
        assert "ASIA" not in str(done)
