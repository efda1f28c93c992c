"""The key before the body: a request that sends a body to a route behind the API key has its
key checked before a byte of that body is read (spec §8).

FastAPI reads and parses a route's body before it runs the route's dependencies, the key check
among them, and ``RequestGuard`` reads the whole body before the app runs at all: an
unauthenticated caller could make the service read and parse 16 MiB per request. Here the route
the request is for is found as the router will find it, and the key check it declares
(the key half of ``require_api_key``, or ``require_metrics_key``) runs first; a refusal is
answered at once, the body left unread (the server discards it). The route runs its check
again as always: this one only moves a refusal earlier, it grants nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from fastapi.routing import RouteContext, iter_route_contexts
from fastapi.security import HTTPBearer
from starlette.requests import Request
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import (
    compat_key_declared,
    refuse_unknown_compat_key,
    refuse_unknown_key,
    require_api_key,
    require_metrics_key,
)
from app.api.problems import service_error_response
from app.api.routes.compat import refusal_response
from app.core.errors import ServiceError

__all__ = ["KeyBeforeBody"]

KeyCheck = Callable[..., Awaitable[Any]]
# The route's own check → what runs before its body is read: the key alone (the route itself
# takes the rate-limit token and checks the session's tenant, once).
_KEY_CHECKS: dict[KeyCheck, KeyCheck] = {
    require_api_key: refuse_unknown_key,
    require_metrics_key: require_metrics_key,
    # The compatible endpoints (spec §21): the key as their SDKs send it, refused in the
    # protocol's own error shape.
    compat_key_declared: refuse_unknown_compat_key,
}
_bearer = HTTPBearer(auto_error=False)


def _sends_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


@dataclass(frozen=True)
class _Route:
    route: RouteContext
    path_regex: re.Pattern[str] | None
    check: KeyCheck | None

    @classmethod
    def of(cls, route: RouteContext) -> _Route:
        checks = [_KEY_CHECKS[call] for call in _calls(getattr(route, "dependant", None))]
        return cls(route, getattr(route, "path_regex", None), checks[0] if checks else None)


def _calls(dependant: Any) -> list[KeyCheck]:
    """The key checks among a route's dependencies, however deep (``require_admin`` depends on
    ``require_api_key``)."""
    found: list[KeyCheck] = []
    for sub in getattr(dependant, "dependencies", ()):
        if sub.call in _KEY_CHECKS:
            found.append(cast(KeyCheck, sub.call))
        else:
            found.extend(_calls(sub))
    return found


class KeyBeforeBody:
    """Pure ASGI middleware, outside every middleware that reads the body."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes  # filled in after the middleware is added: read on first use
        self._routes: list[_Route] | None = None

    def key_check(self, scope: Scope) -> tuple[KeyCheck, Scope] | None:
        """The key check of the route ``scope`` is for, and the scope the route would see (its
        path parameters), if that route has one."""
        if self._routes is None:  # in the router's order
            self._routes = [_Route.of(route) for route in iter_route_contexts(self.routes)]
        path = scope.get("path", "")
        for route in self._routes:
            if route.path_regex is not None and not route.path_regex.match(path):
                continue  # the cheap look first: ``matches`` builds the route's scope
            match, child = route.route.matches(scope)
            if match is Match.FULL:
                return None if route.check is None else (route.check, {**scope, **child})
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _sends_body(scope):
            found = self.key_check(scope)
            if found is not None:
                check, route_scope = found
                request = Request(route_scope)
                try:
                    await check(request, await _bearer(request))
                except ServiceError as refused:
                    if check is refuse_unknown_compat_key:
                        answer = refusal_response(scope.get("path", ""), refused)
                    else:
                        answer = service_error_response(refused)
                    await answer(scope, receive, send)
                    return
        await self.app(scope, receive, send)
