"""Structured JSON log lines (and plain text ones, ``CTXSVC_JSON_LOGS=false``).

One JSON object per line on stderr: ``time``, ``level``, ``logger``, ``message``, ``request_id``,
the ``session_id`` / ``turn_id`` the task works for (``context.bound_work``), the trace and span
ids when a span is being recorded, then the line's own fields (``extra={"fields": {...}}``, or
any other ``extra`` key).
The service's event lines (``event_line``) carry an ``event`` name and counts, ids, timings and
codes only: never message content, tool input or output, keys or provider error bodies.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from app.observability.context import current_work, request_id_var

__all__ = [
    "JsonFormatter",
    "TextFormatter",
    "configure_logging",
    "configure_text_logging",
    "event_line",
    "redacted_traceback",
]


# What every LogRecord has (and ``fields``, merged on its own): anything else came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(
    {
        *logging.LogRecord("", 0, "", 0, "", None, None).__dict__,
        "message",
        "asctime",
        "taskName",
        "fields",
    }
)


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
        work = current_work()
        if work.session_id is not None:
            entry["session_id"] = work.session_id
        if work.turn_id is not None:
            entry["turn_id"] = work.turn_id
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = format(span.trace_id, "032x")
            entry["span_id"] = format(span.span_id, "016x")
        # ``extra={...}`` keys become fields too (``extra={"fields": {...}}`` is the usual way).
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES:
                entry[key] = value
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)

    def formatException(self, ei: Any) -> str:
        return redacted_traceback(ei)


class TextFormatter(logging.Formatter):
    """Plain text lines (``CTXSVC_JSON_LOGS=false``) whose tracebacks withhold database errors'
    text as ``JsonFormatter`` does."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # ``logging.Formatter`` reuses a traceback another handler's formatter cached on the
        # record, unredacted: format it afresh and leave the record as it was.
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatException(self, ei: Any) -> str:
        return redacted_traceback(ei)


def redacted_traceback(ei: Any) -> str:
    """The traceback, with every database error's text replaced by what it is (class,
    SQLSTATE, constraint): a driver's text quotes rows ("Failing row contains (…)": a
    summary, a user's message), and logs carry no content."""
    _, value, _ = ei
    if value is None:
        return "".join(traceback.format_exception(*ei)).rstrip("\n")
    chain: list[BaseException] = []
    current: BaseException | None = value
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    parts: list[str] = []
    for exc in reversed(chain):
        lines = traceback.format_list(traceback.extract_tb(exc.__traceback__))
        parts.append("Traceback (most recent call last):\n" + "".join(lines))
        parts.append(f"{type(exc).__module__}.{type(exc).__qualname__}: {_safe_text(exc)}\n")
    return "".join(parts).rstrip("\n")


_DATABASE_MODULES = ("sqlalchemy", "psycopg", "sqlite3", "aiosqlite", "app.storage")


def _safe_text(exc: BaseException) -> str:
    if not type(exc).__module__.startswith(_DATABASE_MODULES):
        return str(exc)
    said: list[str] = ["(text withheld: it may quote stored content)"]
    orig = getattr(exc, "orig", None)
    for source in (exc, orig):
        sqlstate = getattr(source, "sqlstate", None)
        if sqlstate:
            said.append(f"SQLSTATE {sqlstate}")
        diag = getattr(source, "diag", None)
        constraint = getattr(diag, "constraint_name", None)
        if constraint:
            said.append(f"constraint {constraint}")
        code = getattr(source, "sqlite_errorname", None)
        if code:
            said.append(f"SQLite {code}")
    return " ".join(said)


def configure_logging(level: str) -> None:
    """JSON lines on stderr, in place of whatever handlers the root logger had."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = name != "uvicorn.access"


def configure_text_logging(level: str) -> None:
    """Plain text lines on stderr when the host configured no logging of its own (a handler on
    the root logger: a test runner's, an embedding application's is left alone). Without one,
    Python's last-resort handler would print tracebacks with the database's text (a
    PostgreSQL DETAIL quotes the failing row, i.e. content)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)


def event_line(
    logger: logging.Logger, level: int, event: str, message: str, fields: Mapping[str, Any]
) -> None:
    """One event line (``fields`` after ``event``). Callers check ``logger.isEnabledFor(level)``
    before they build ``fields``, so a level that is off costs nothing but that check."""
    logger.log(level, message, extra={"fields": {"event": event, **fields}})
