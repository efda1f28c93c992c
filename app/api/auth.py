"""Bearer API keys for every ``/v1`` route and ``/metrics`` (health and docs stay open), and the
tenant each request acts for (``docs/security.md``).

Who is calling (``authenticate``): a key of ``CTXSVC_API_KEYS`` is the ``default`` tenant with
the admin scope, as every key was before tenants existed; a key made through the admin API is
its own tenant and scope; with no keys configured the service is open and a request without a
stored key acts for ``default`` as an admin (the embedded default on loopback). Then, per tenant:

- a path that names a session of another tenant answers 404 ``session_not_found``, as if the
  session did not exist (never 403: existence is not revealed);
- ``CTXSVC_RATE_LIMIT_REQUESTS`` per ``CTXSVC_RATE_LIMIT_WINDOW_SECONDS`` (a token bucket per
  tenant and process) answers 429 ``tenant_rate_limited`` with ``Retry-After`` beyond it.
"""

from __future__ import annotations

import hmac
import time
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.container import Container
from app.core.errors import Forbidden, RateLimited, Unauthorized
from app.core.tenancy import OPEN_PRINCIPAL, Principal

__all__ = [
    "AdminDep",
    "PrincipalDep",
    "authenticate",
    "compat_key_declared",
    "compat_principal",
    "refuse_unknown_compat_key",
    "refuse_unknown_key",
    "require_admin",
    "require_api_key",
    "require_metrics_key",
]

_bearer = HTTPBearer(
    auto_error=False,
    description="An API key: one of CTXSVC_API_KEYS, or one made by POST /v1/admin/keys.",
)


async def authenticate(container: Container, offered: str | None) -> Principal | None:
    """The caller ``offered`` (a bearer key, ``None``: none sent) stands for, or ``None`` when
    the service wants a key and this is none of its keys."""
    configured: list[str] = container.settings.api_keys
    if offered is not None:
        raw = offered.encode()
        # Compare against every key without short-circuiting, so timing reveals nothing.
        matched = False
        for key in configured:
            matched |= hmac.compare_digest(raw, key.encode())
        if matched:
            return OPEN_PRINCIPAL
        stored = await container.tenancy.principal_of(offered)
        if stored is not None:
            return stored
    # No keys configured: the embedded default is open on loopback.
    return None if configured else OPEN_PRINCIPAL


async def require_api_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    container: Container = request.app.state.container
    principal = await authenticate(container, credentials.credentials if credentials else None)
    if principal is None:
        raise _unauthorized()
    _check_rate(container, principal)
    session_id = request.path_params.get("session_id")
    if isinstance(session_id, str):
        # Every route under a session (messages, turns, events, compactions, pins, items):
        # another tenant's session is answered as one that does not exist.
        await container.tenancy.check_owner(principal.tenant_id, session_id)
    request.state.principal = principal
    return principal


async def refuse_unknown_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Only the key half of ``require_api_key``: refuses a caller the service does not know. The
    key-before-body check runs this, not the whole dependency, so that a request takes one
    token of its tenant's rate limit and is checked for ownership once, by its route."""
    container: Container = request.app.state.container
    if await authenticate(container, credentials.credentials if credentials else None) is None:
        raise _unauthorized()


def _compat_key(request: Request) -> str | None:
    """The key a compatible endpoint's caller sent: ``Authorization: Bearer`` (the OpenAI SDK)
    or ``x-api-key`` (the Anthropic SDK)."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.headers.get("x-api-key") or None


def _compat_unauthorized() -> Unauthorized:
    return Unauthorized(
        "unauthorized",
        "missing or invalid API key: the SDK's api_key must be a key of this service "
        "(sent as `Authorization: Bearer <key>` or `x-api-key: <key>`)",
    )


async def compat_principal(request: Request) -> Principal:
    """Who calls a compatible endpoint (spec §21.4): the service key as the SDK sends its own
    key; one rate-limit token."""
    container: Container = request.app.state.container
    principal = await authenticate(container, _compat_key(request))
    if principal is None:
        raise _compat_unauthorized()
    _check_rate(container, principal)
    return principal


async def compat_key_declared() -> None:
    """The compatible endpoints' routes declare this dependency (it does nothing when they run:
    each route authenticates itself, ``compat_principal``) so that ``app.api.key_first`` checks
    their key before their body is read (``refuse_unknown_compat_key``)."""


async def refuse_unknown_compat_key(request: Request, _: object = None) -> None:
    """The key half of ``compat_principal``, for ``app.api.key_first``."""
    container: Container = request.app.state.container
    if await authenticate(container, _compat_key(request)) is None:
        raise _compat_unauthorized()


def _unauthorized() -> Unauthorized:
    return Unauthorized(
        "unauthorized", "missing or invalid API key: send `Authorization: Bearer <key>`"
    )


def _check_rate(container: Container, principal: Principal) -> None:
    buckets = container.rate_limits
    if buckets is None:
        return
    retry_after = buckets.take(principal.tenant_id, time.monotonic())
    if retry_after is not None:
        raise RateLimited(
            "tenant_rate_limited",
            f"this tenant made more than {buckets.capacity} requests in "
            f"{container.settings.rate_limit_window_seconds:g} s; retry after "
            f"{retry_after} s",
            retry_after_seconds=retry_after,
        )


async def require_metrics_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """The API keys, unless ``CTXSVC_METRICS_PUBLIC`` opens ``/metrics`` to scrapers. A scrape
    is no tenant's work: it takes nothing from a rate limit."""
    container: Container = request.app.state.container
    if container.settings.metrics_public:
        return
    offered = credentials.credentials if credentials else None
    if await authenticate(container, offered) is None:
        raise _unauthorized()


PrincipalDep = Annotated[Principal, Depends(require_api_key)]


async def require_admin(principal: PrincipalDep) -> Principal:
    if not principal.admin:
        raise Forbidden(
            "admin_scope_required",
            "this operation needs a key with the admin scope (a key of CTXSVC_API_KEYS, or one "
            "made with scope admin)",
        )
    return principal


AdminDep = Annotated[Principal, Depends(require_admin)]
