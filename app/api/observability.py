"""The request middleware: request id in and out, one access line, the HTTP metrics.

Every log line written while a request is served carries its request id: the caller's
``X-Request-ID`` when it is sane (1–128 of ``A-Z a-z 0-9 . _ : -``), a generated one otherwise,
returned in the ``X-Request-ID`` response header. The access line names the method, the route
template (never the raw path), the status, the time taken, the session and turn ids of the path,
and for an error answer its problem ``code`` (``request refused`` for 4xx, ``request failed`` for
5xx). Never bodies, message content or credentials.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import Metrics
from app.observability.context import request_id_from_header, serving
from app.observability.logs import event_line
from app.observability.metrics import multiprocess_mode

__all__ = ["RequestContext", "route_template"]

access_log = logging.getLogger("ctxsvc.access")

UNMATCHED = "unmatched"


def route_template(scope: Scope, received: Scope) -> str:
    """The template of the route that served ``scope`` (``unmatched`` for none); ``received``
    is the scope as it arrived (a mount rewrites the paths of the one it passes on).

    FastAPI's own routes put themselves in the scope; Starlette's (the docs pages, the OpenAPI
    document, mounted files) do not, so they are matched again here."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    app = scope.get("app")
    for candidate in getattr(getattr(app, "router", None), "routes", ()):
        match, _ = candidate.matches(received)
        if match is Match.FULL:
            template = str(getattr(candidate, "path", UNMATCHED))
            return f"{template}/{{path}}" if isinstance(candidate, Mount) else template
    return UNMATCHED


class RequestContext:
    """Pure ASGI middleware (no task of its own: the endpoint runs in the request's context)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        # Each worker's pool and GC figures reach the shared files only when that worker sets
        # them (its GC callback only counts: ``Metrics.publish_gc``).
        self._refresh_pool = multiprocess_mode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = request_id_from_header(incoming)
        header = (b"x-request-id", request_id.encode("latin-1"))
        status = 500
        started = time.perf_counter()
        received = dict(scope)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        with serving(request_id) as served:
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                # ``UnexpectedErrors`` (inside) answers every bug; this is the server's then.
                served.problem_code = served.problem_code or "internal_error"
                raise
            finally:
                elapsed = time.perf_counter() - started
                route = route_template(scope, received)
                method = scope.get("method", "-")
                self.metrics.requests.labels(method, route, str(status)).inc()
                self.metrics.latency.labels(method, route).observe(elapsed)
                if self._refresh_pool:
                    self.metrics.refresh_pool()
                    self.metrics.publish_gc()
                self._access_line(scope, method, route, status, elapsed, served.problem_code)

    @staticmethod
    def _access_line(
        scope: Scope, method: str, route: str, status: int, elapsed: float, code: str | None
    ) -> None:
        level = logging.WARNING if status >= 500 else logging.INFO
        if not access_log.isEnabledFor(level):
            return
        fields: dict[str, Any] = {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(elapsed * 1000, 2),
        }
        params = scope.get("path_params") or {}
        for name in ("session_id", "turn_id", "compaction_id", "model_id"):
            value = params.get(name)
            if isinstance(value, str):
                fields[name] = value
        message = "request"
        if status >= 400:
            fields["code"] = code
            message = "request refused" if status < 500 else "request failed"
        event_line(access_log, level, "request", message, fields)
