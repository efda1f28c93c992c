"""Bearer API keys for every ``/v1`` route and ``/metrics`` (health and docs stay open)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.core.errors import Unauthorized

__all__ = ["require_api_key", "require_metrics_key"]

_bearer = HTTPBearer(auto_error=False, description="An API key from CTXSVC_API_KEYS.")


async def require_api_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    keys: list[str] = request.app.state.container.settings.api_keys
    if not keys:
        return  # no keys configured: the embedded default is open on loopback
    offered = credentials.credentials.encode() if credentials else b""
    # Compare against every key without short-circuiting, so timing reveals nothing.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(offered, key.encode())
    if not matched:
        raise Unauthorized(
            "unauthorized",
            "missing or invalid API key: send `Authorization: Bearer <key>`",
        )


async def require_metrics_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """The API keys, unless ``CTXSVC_METRICS_PUBLIC`` opens ``/metrics`` to scrapers."""
    if not request.app.state.container.settings.metrics_public:
        await require_api_key(request, credentials)
