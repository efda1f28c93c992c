"""Request ids, structured JSON logs and Prometheus metrics.

Every log line carries the request id (from ``X-Request-ID`` when the caller sends a sane one,
returned in the response). Only method, route template, status and timing are logged at info:
never bodies, message content or credentials.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from sqlalchemy.pool import Pool, QueuePool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "JsonFormatter",
    "Metrics",
    "RequestContext",
    "configure_logging",
    "pool_figures",
    "request_id_var",
]

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
access_log = logging.getLogger("ctxsvc.access")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id_var.get(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = name != "uvicorn.access"
    # httpx logs every request at INFO ("HTTP Request: POST …"): a line per model call that says
    # less than the turn's own records. At DEBUG it is wanted.
    logging.getLogger("httpx").setLevel(logging.NOTSET if level == "DEBUG" else logging.WARNING)


class Metrics:
    """One registry per app, so several apps (tests, replicas in one process) never collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ctxsvc_http_requests",
            "HTTP requests by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ctxsvc_http_request_duration_seconds",
            "HTTP request latency by route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.prepare = Histogram(
            "ctxsvc_prepare_duration_seconds",
            "Time spent in the prepare pipeline, by caller (stateless, session, inspection, turn).",
            ["kind"],
            registry=self.registry,
        )
        self.pool = Gauge(
            "ctxsvc_db_pool_connections",
            "Database pool connections by state.",
            ["state"],
            registry=self.registry,
        )
        self.compactions = Counter(
            "ctxsvc_compactions",
            "Compactions by trigger and result.",
            ["trigger", "result"],
            registry=self.registry,
        )
        self.compaction_tokens_reclaimed = Counter(
            "ctxsvc_compaction_tokens_reclaimed",
            "Conversation tokens reclaimed by compactions.",
            ["trigger"],
            registry=self.registry,
        )
        self.compaction_phase = Histogram(
            "ctxsvc_compaction_phase_seconds",
            "Compaction phase timings (prepare, summary, persistence, install).",
            ["phase"],
            registry=self.registry,
        )
        self.pool_probe: Callable[[], dict[str, int]] | None = None

    def refresh_pool(self) -> None:
        if self.pool_probe is not None:
            for state, value in self.pool_probe().items():
                self.pool.labels(state).set(value)


def pool_figures(pool: Pool) -> dict[str, int]:
    """Connections of a queue pool by state (PostgreSQL, and SQLite files on SQLAlchemy 2).

    Pools that keep no connections (``NullPool``, ``StaticPool``) have nothing to report.
    """
    if not isinstance(pool, QueuePool):
        return {}
    return {
        "size": pool.size(),
        "checked_out": pool.checkedout(),
        "idle": pool.checkedin(),
        # Negative while the pool is below its size (SQLAlchemy counts from -size); 0 then.
        "overflow": max(pool.overflow(), 0),
    }


class RequestContext:
    """Pure ASGI middleware: request id in, request id out, one access log line, metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode("latin-1")),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope.get("method", "-")
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            access_log.info(
                "request",
                extra={
                    "fields": {
                        "method": method,
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                    }
                },
            )
            request_id_var.reset(token)
