"""Access control: bearer API keys on every ``/v1`` route and ``/metrics``; health, readiness
and docs stay open.

Plus the settings validators that keep a production deployment from starting unsafe.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from app.main import create_app
from app.settings import Settings
from tests.api.helpers import session_body
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

KEY = "k-3f9a1c7e5b2d4f60a8c1e9b7d3f5a2c4"
OTHER_KEY = "k-0000000000000000000000000000ffff"


@pytest.fixture
async def keyed(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(sqlite_url, api_keys=[OTHER_KEY, KEY])):
        yield client


def v1_operations() -> list[tuple[str, str]]:
    """(method, path with placeholders filled) of every ``/v1`` operation the app documents."""
    app = create_app(Settings(migrate_on_start=False, _env_file=None))
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, operations in app.openapi()["paths"].items()
        if path.startswith("/v1")
        for method in operations
    ]


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "unauthorized"


def test_the_route_list_covers_the_api() -> None:
    paths = {path for _, path in v1_operations()}
    assert {"/v1/prepare", "/v1/sessions", "/v1/sessions/x/messages"} <= paths


@pytest.mark.parametrize(("method", "path"), v1_operations())
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-key-0123456789abcdef", f"Basic {KEY}", "Bearer ", KEY],
    ids=["missing", "wrong", "other-scheme", "empty", "no-scheme"],
)
async def test_every_v1_route_refuses_requests_without_a_valid_key(
    keyed: httpx.AsyncClient, method: str, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    # A valid JSON body, so the refusal cannot come from body parsing.
    kwargs: dict[str, Any] = {"json": {}} if method in {"POST", "PUT", "PATCH"} else {}
    assert_unauthorized(await keyed.request(method, path, headers=headers, **kwargs))


async def test_any_configured_key_opens_the_api(keyed: httpx.AsyncClient) -> None:
    for key in (KEY, OTHER_KEY):
        headers = {"Authorization": f"Bearer {key}"}
        created = await keyed.post("/v1/sessions", json=session_body(), headers=headers)
        assert created.status_code == 201, created.text
        listed = await keyed.get("/v1/sessions", headers=headers)
        assert listed.status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/docs", "/openapi.json"])
async def test_service_endpoints_stay_open(keyed: httpx.AsyncClient, path: str) -> None:
    assert (await keyed.get(path)).status_code == 200


async def test_metrics_take_the_api_keys_when_keys_are_set(keyed: httpx.AsyncClient) -> None:
    assert_unauthorized(await keyed.get("/metrics"))
    assert_unauthorized(await keyed.get("/metrics", headers={"Authorization": "Bearer nope"}))
    opened = await keyed.get("/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert opened.status_code == 200
    assert "ctxsvc_http_requests" in opened.text


async def test_a_setting_makes_metrics_public_for_scrapers(sqlite_url: str) -> None:
    settings = make_settings(sqlite_url, api_keys=[KEY], metrics_public=True)
    async for client in client_for(settings):
        response = await client.get("/metrics")
        assert response.status_code == 200
        assert "ctxsvc_http_requests" in response.text
        assert_unauthorized(await client.get("/v1/sessions"))  # the API itself stays keyed


async def test_without_keys_metrics_are_open(sqlite_api: httpx.AsyncClient) -> None:
    assert (await sqlite_api.get("/metrics")).status_code == 200


async def test_without_configured_keys_the_api_is_open(
    sqlite_api: httpx.AsyncClient,
) -> None:
    assert (await sqlite_api.get("/v1/sessions")).status_code == 200


def production(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"environment": "production", "api_keys": [KEY], "_env_file": None}
    values.update(overrides)
    return Settings(**values)


def test_production_accepts_strong_keys_and_absolute_roots() -> None:
    settings = production(workspace_roots=["/srv/workspaces", "/home/agents/"])
    assert settings.workspace_roots == ["/srv/workspaces", "/home/agents"]


@pytest.mark.parametrize(
    "keys",
    [[], ["changeme"], ["secret"], ["CHANGEME"], ["short-key-123"], [KEY, "example"]],
    ids=["none", "changeme", "secret", "upper-case", "short", "one-weak-among-strong"],
)
def test_production_refuses_missing_placeholder_or_short_keys(keys: list[str]) -> None:
    with pytest.raises(ValidationError, match=r"CTXSVC_API_KEYS|placeholder or short"):
        production(api_keys=keys)


def test_development_allows_short_keys_for_local_use() -> None:
    settings = Settings(api_keys=["dev"], _env_file=None)
    assert settings.api_keys == ["dev"]


@pytest.mark.parametrize("root", ["*", "/", "", " ", "/srv/*", "relative/dir"])
@pytest.mark.parametrize("environment", ["development", "production"])
def test_unsafe_workspace_roots_are_refused(root: str, environment: str) -> None:
    with pytest.raises(ValidationError, match="workspace root"):
        production(environment=environment, workspace_roots=[root])
