"""Database outages: an expected operating condition, told apart from bugs (spec §8).

An unreachable database, a lost connection, a read-only or a full database are not defects of
the service: requests that meet one answer 503 ``database_unavailable`` with ``Retry-After``
(``app.api.problems``), the log gets one line per outage and kind (not a traceback per request:
an outage under load wrote megabytes a second), ``/readyz`` says not ready while it lasts, and
the service recovers by itself once the database does (the pool reconnects; nothing restarts).

``outage_of`` reads the exception chain: SQLAlchemy's wrappers, the drivers' errors (PostgreSQL
SQLSTATE classes, SQLite result codes) and the pool's own timeout. ``Outages`` remembers, per
process, a write outage (read-only, full) that a read-only readiness probe cannot see itself.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ["OUTAGE_RETRY_AFTER_SECONDS", "OutageReason", "Outages", "describe", "outage_of"]

logger = logging.getLogger("ctxsvc.database")

OutageReason = Literal["unreachable", "read_only", "full", "io_error"]

# What a 503 tells callers to wait before the next try: a restarting PostgreSQL or a failover
# takes seconds; the caller's own backoff takes over from there.
OUTAGE_RETRY_AFTER_SECONDS = 5

# A repeated outage line at most this often per kind (the count of the others goes with it).
_LOG_EVERY_SECONDS = 30.0
# A write outage (read-only, full) seen by a request keeps readiness off this long unless a
# write succeeds first (``Outages.writes_succeeded``).
_WRITE_OUTAGE_HOLD_SECONDS = 30.0
# Below this much free space on a SQLite file's filesystem the next writes would fail.
_SQLITE_MIN_FREE_BYTES = 64 * 1024

# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
_PG_READ_ONLY = {"25006"}  # read_only_sql_transaction (a standby, default_transaction_read_only)
_PG_FULL = {"53100"}  # disk_full
_PG_UNREACHABLE_CLASSES = ("08",)  # connection exceptions
_PG_UNREACHABLE = {
    "53300",  # too_many_connections
    "57P01",  # admin_shutdown
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now (starting up, recovering)
    "57P05",  # idle_session_timeout
}
# SQLite primary result codes (https://www.sqlite.org/rescode.html).
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL = 8, 10, 14, 13


def outage_of(exc: BaseException) -> OutageReason | None:
    """The outage ``exc`` (or an exception it was raised from) reports, or ``None`` (a bug, a
    constraint, anything else)."""
    for error in _chain(exc):
        if isinstance(error, PoolTimeout | DisconnectionError):
            return "unreachable"
        if isinstance(error, DBAPIError):
            if error.connection_invalidated:
                return "unreachable"
            continue  # its driver error (``orig``) is next in the chain
        reason = _driver_outage(error)
        if reason is not None:
            return reason
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        orig = current.orig if isinstance(current, DBAPIError) else None
        if isinstance(orig, BaseException) and id(orig) not in seen:
            yield orig
            seen.add(id(orig))
        current = current.__cause__ or current.__context__


def _driver_outage(error: BaseException) -> OutageReason | None:
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == _SQLITE_FULL:
            return "full"
        if primary == _SQLITE_READONLY:
            return "read_only"
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return "io_error"
        return None
    module = type(error).__module__
    if not module.startswith("psycopg"):
        return None
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is None:
        # psycopg raises connection failures (refused, reset, closed by the server) without a
        # SQLSTATE, as OperationalError or InterfaceError.
        name = type(error).__name__
        return "unreachable" if name in {"OperationalError", "InterfaceError"} else None
    if sqlstate in _PG_READ_ONLY:
        return "read_only"
    if sqlstate in _PG_FULL:
        return "full"
    if sqlstate in _PG_UNREACHABLE or sqlstate.startswith(_PG_UNREACHABLE_CLASSES):
        return "unreachable"
    return None


class Outages:
    """This process's view of database outages: the rate-limited log and what readiness needs
    to know beyond its own probe."""

    def __init__(self, database_url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sqlite_dir = _sqlite_directory(database_url)
        # Per outage kind, and "not_ready" for a probe's other failures.
        self._last_logged: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._write_outage_until = 0.0
        self._write_reason: OutageReason = "full"
        self._in_outage = False
        self._recovery_logged = -_LOG_EVERY_SECONDS

    def seen(self, reason: OutageReason, exc: BaseException) -> None:
        """A request met an outage: log it (once per kind and ``_LOG_EVERY_SECONDS``, the
        error's class and SQLSTATE only: a driver's message can quote a statement's
        parameters, i.e. content)."""
        self._in_outage = True
        if reason in ("read_only", "full", "io_error"):
            self._write_outage_until = self._clock() + _WRITE_OUTAGE_HOLD_SECONDS
            self._write_reason = reason
        self._log_limited(
            reason,
            "database unavailable (%s, %s): answering 503 database_unavailable until it"
            " recovers; %d more since the last line",
            reason,
            describe(exc),
        )

    def probe_failed(self, exc: BaseException) -> None:
        """A readiness probe could not read the schema: an outage is logged as a request's is
        (``seen``); another failure once every ``_LOG_EVERY_SECONDS`` too, and just as
        described (class and SQLSTATE): probes come every few seconds from every
        orchestrator."""
        reason = outage_of(exc)
        if reason is not None:
            self.seen(reason, exc)
            return
        self._log_limited(
            "not_ready",
            "database not ready (%s): /readyz answers 503 not_ready; %d more since the last line",
            describe(exc),
        )

    def _log_limited(self, key: str, template: str, *args: str) -> None:
        """Log ``template % (*args, suppressed)`` unless ``key`` was logged less than
        ``_LOG_EVERY_SECONDS`` ago (then count it in ``suppressed`` of the next line)."""
        now = self._clock()
        last = self._last_logged.get(key)
        if last is not None and now - last < _LOG_EVERY_SECONDS:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        suppressed = self._suppressed.pop(key, 0)
        self._last_logged[key] = now
        logger.error(template, *args, suppressed)

    def writes_succeeded(self) -> None:
        """A write committed: whatever write outage was seen is over."""
        self._write_outage_until = 0.0
        if self._in_outage:
            # The rate limit stays: during a restart some pooled connections still fail while
            # new ones work, and the outage must not be told again at every flap.
            self._in_outage = False
            now = self._clock()
            if now - self._recovery_logged >= _LOG_EVERY_SECONDS:
                self._recovery_logged = now
                logger.warning("database available again")

    def write_problem(self) -> OutageReason | None:
        """Why writes would fail now although the database answers reads (readiness)."""
        if self._clock() < self._write_outage_until:
            return self._write_reason
        if self._sqlite_dir is not None:
            try:
                stats = os.statvfs(self._sqlite_dir)
            except OSError:
                return "io_error"
            if stats.f_bavail * stats.f_frsize < _SQLITE_MIN_FREE_BYTES:
                return "full"
        return None


def describe(exc: BaseException) -> str:
    """``Class``, ``Class SQLSTATE xxxxx [constraint name]`` or ``Class SQLite code n`` of the
    driver's error under ``exc``: never its message (it can quote a row's content)."""
    for error in _chain(exc):
        if not isinstance(error, DBAPIError):
            sqlstate = getattr(error, "sqlstate", None)
            name = f"{type(error).__module__}.{type(error).__qualname__}"
            if sqlstate:
                constraint = getattr(getattr(error, "diag", None), "constraint_name", None)
                on = f" constraint {constraint}" if constraint else ""
                return f"{name} SQLSTATE {sqlstate}{on}"
            code = getattr(error, "sqlite_errorcode", None)
            return f"{name} SQLite code {code}" if code is not None else name
    return type(exc).__qualname__


def _sqlite_directory(database_url: str) -> Path | None:
    url = make_url(database_url)
    if not url.get_backend_name().startswith("sqlite") or not url.database:
        return None
    if url.database == ":memory:" or url.database.startswith("file:"):
        return None
    return Path(url.database).resolve().parent
