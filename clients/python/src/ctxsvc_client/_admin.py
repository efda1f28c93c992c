"""The admin operations (``/v1/admin``; a key with the admin scope): API keys bound to tenants
and shared models, as typed answers and ``Call``s."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from ctxsvc_client._callkit import model_of
from ctxsvc_client._calls import Call, path
from ctxsvc_client._models import Model, _Result

__all__ = [
    "ApiKey",
    "ApiKeyList",
    "IssuedApiKey",
    "KeyScope",
    "create_key",
    "delete_shared_model",
    "list_keys",
    "put_shared_model",
    "revoke_key",
    "rotate_key",
]

KeyScope = Literal["tenant", "admin"]


class ApiKey(_Result):
    id: str
    tenant_id: str
    scope: str
    name: str | None = None
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None


class IssuedApiKey(ApiKey):
    key: str  # shown this once: only its digest is stored


class ApiKeyList(_Result):
    keys: list[ApiKey]


def create_key(
    *, tenant_id: str, scope: KeyScope = "tenant", name: str | None = None
) -> Call[IssuedApiKey]:
    """A new key of ``tenant_id``; the answer is the only time the key itself is shown."""
    body: dict[str, Any] = {"tenant_id": tenant_id, "scope": scope}
    if name is not None:
        body["name"] = name
    # Not repeated on a dropped connection: a second key would be made.
    return Call("POST", "/v1/admin/keys", model_of(IssuedApiKey), json=body)


def list_keys(*, tenant_id: str | None = None) -> Call[ApiKeyList]:
    """Every stored key (never the key itself), or those of one tenant."""
    params = {"tenant_id": tenant_id} if tenant_id is not None else None
    return Call("GET", "/v1/admin/keys", model_of(ApiKeyList), params=params, idempotent=True)


def rotate_key(key_id: str) -> Call[IssuedApiKey]:
    """A new key of the same tenant, scope and name; the old one works until revoked."""
    return Call("POST", path("v1", "admin", "keys", key_id, "rotate"), model_of(IssuedApiKey))


def revoke_key(key_id: str) -> Call[None]:
    """From now on the key authenticates nothing (a revoked key is 404 afterwards)."""
    return Call("DELETE", path("v1", "admin", "keys", key_id), lambda r: None)


def put_shared_model(
    model_id: str,
    *,
    context_window_tokens: int,
    max_output_tokens: int,
    provider: Mapping[str, Any],
    **capabilities: Any,
) -> Call[Model]:
    """Register or replace a model every tenant sees (its own model of that id overrides it)."""
    body = {
        "context_window_tokens": context_window_tokens,
        "max_output_tokens": max_output_tokens,
        "provider": dict(provider),
        **{k: v for k, v in capabilities.items() if v is not None},
    }
    url = path("v1", "admin", "models", model_id)
    return Call("PUT", url, model_of(Model), json=body, idempotent=True)


def delete_shared_model(model_id: str) -> Call[None]:
    """Remove a shared model (409 ``model_in_use`` while any tenant's session uses it)."""
    return Call("DELETE", path("v1", "admin", "models", model_id), lambda r: None)
