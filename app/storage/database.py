"""Engine, session factory and the unit of work.

One database URL selects the backend: ``sqlite+aiosqlite:///./data/ctxsvc.db`` (embedded default)
or ``postgresql+psycopg://user@host/db`` (production).

SQLite is set up for a server: WAL (readers never block the writer), ``foreign_keys=ON`` (off by
default in SQLite), a busy timeout, and SQLAlchemy emits ``BEGIN`` itself instead of the sqlite3
driver. That last part is the recipe of SQLAlchemy's SQLite docs ("Enabling Non-Legacy SQLite
Transactional Modes"): the driver's legacy mode starts no transaction for SELECT, DDL or SAVEPOINT,
which breaks savepoints and transactional migrations. Transactions begin ``IMMEDIATE`` (taking the
write lock up front) so that two writers never both hold a read lock and then deadlock upgrading
it, which SQLite reports as an instant ``database is locked`` that the busy timeout cannot cure.
A unit of work opened with ``read_only=True`` begins ``DEFERRED`` instead, so readers run in
parallel with the writer.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.ext.asyncio.base import _run_to_completion  # private: pinned <2.2 (pyproject)
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.pool import ConnectionPoolEntry

from app.storage import deferred
from app.storage.base import dumps_json, loads_json
from app.storage.collisions import sequence_collision
from app.storage.sqlite_driver import inline_dbapi

__all__ = [
    "READ_ONLY",
    "PoolSettings",
    "SessionFactory",
    "create_engine",
    "create_session_factory",
    "on_commit",
    "sqlite_database_path",
    "transaction_values",
    "unit_of_work",
]

logger = logging.getLogger(__name__)

SessionFactory = async_sessionmaker[AsyncSession]

# Execution option that makes an SQLite transaction begin DEFERRED (see module docstring).
READ_ONLY = "ctxsvc_read_only"

SQLITE_BUSY_TIMEOUT_MS = 30_000

# A pooled PostgreSQL connection idle for this long is pinged before use (``_ping_after_idle``).
PING_AFTER_IDLE_SECONDS = 5.0
_IDLE_SINCE = "ctxsvc_idle_since"


def sqlite_database_path(url: str) -> Path | None:
    """The file of an SQLite URL (``None`` for other backends and in-memory databases)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """The PostgreSQL pool of one process (``CTXSVC_DB_POOL_*``): connections kept open, more a
    burst may open (closed when returned: each is a new server process and its authentication,
    ~2 ms of database CPU), seconds a checkout waits before failing, and the age in seconds
    after which a connection is replaced (-1: never)."""

    size: int = 20
    max_overflow: int = 10
    timeout: float = 30.0
    recycle: float = 1800.0


def create_engine(url: str, pool: PoolSettings | None = None, **opts: Any) -> AsyncEngine:
    """An ``AsyncEngine`` for ``url``; ``opts`` go to ``create_async_engine`` unchanged but for
    ``ping_after_idle_seconds`` (PostgreSQL: see ``_ping_after_idle``). ``pool`` sizes the
    PostgreSQL pool (SQLite keeps SQLAlchemy's: its writers take turns on one file anyway)."""
    opts.setdefault("json_serializer", dumps_json)
    opts.setdefault("json_deserializer", loads_json)
    # A statement's parameters are content (messages, summaries): SQLAlchemy's exception text
    # must never quote them into a log line.
    opts.setdefault("hide_parameters", True)
    backend = make_url(url).get_backend_name()
    ping_after_idle = opts.pop("ping_after_idle_seconds", PING_AFTER_IDLE_SECONDS)
    if backend == "postgresql":
        if "poolclass" not in opts:
            pool = pool or PoolSettings()
            opts.setdefault("pool_size", pool.size)
            opts.setdefault("max_overflow", pool.max_overflow)
            opts.setdefault("pool_timeout", pool.timeout)
            opts.setdefault("pool_recycle", pool.recycle)
        engine = create_async_engine(url, **opts)
        if not opts.get("pool_pre_ping"):
            _ping_after_idle(engine, ping_after_idle)
        deferred.install(engine)
        return engine
    if backend == "sqlite" and make_url(url).get_driver_name() == "aiosqlite":
        # sqlite3 on the event loop's thread, not on a worker thread (see sqlite_driver).
        opts.setdefault("module", inline_dbapi())
    engine = create_async_engine(url, **opts)
    if backend == "sqlite":
        _configure_sqlite(engine)
    deferred.install(engine)
    return engine


def _ping_after_idle(engine: AsyncEngine, seconds: float) -> None:
    """Check a pooled connection before use when it sat idle for ``seconds`` or more, so that
    one dropped by an idle timeout or a failover is replaced instead of failing the request.

    SQLAlchemy's ``pool_pre_ping`` does this at every checkout: a round trip per transaction,
    more than a whole statement of a turn step. A connection returned moments ago is used as is
    (a failure then invalidates the pool and that one request fails)."""

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(
        dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry, _proxy: Any
    ) -> None:
        idle_since = record.info.get(_IDLE_SINCE)
        if idle_since is None or time.monotonic() - idle_since < seconds:
            return
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
        except Exception as exc:
            # The pool discards this connection and checks out (or opens) another one.
            raise DisconnectionError("pooled connection failed its ping") from exc


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        # Take transaction control away from the driver: SQLAlchemy's "begin" hook emits BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            # NORMAL sync is durable across application crashes in WAL mode and much faster
            # than FULL.
            cursor.execute("PRAGMA synchronous = NORMAL")
            _enable_wal(cursor)
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        statement = "BEGIN DEFERRED" if read_only else "BEGIN IMMEDIATE"
        # Straight to the driver: SQLAlchemy's execution path (``exec_driver_sql``) cost more
        # than the statement, once per transaction. Its errors are still SQLAlchemy's.
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(statement)
        except conn.dialect.loaded_dbapi.Error as exc:
            raise DBAPIError.instance(
                statement, None, exc, conn.dialect.loaded_dbapi.Error
            ) from exc
        finally:
            cursor.close()


def _enable_wal(cursor: Any) -> None:
    # WAL is stored in the file, so only the first connection to a new file switches it. The
    # switch needs the file to itself and does not wait on the busy timeout: when several
    # processes open a brand-new file at once the losers get "database is locked", which is
    # harmless (a winner is switching it), so they carry on.
    cursor.execute("PRAGMA journal_mode")
    if str(cursor.fetchone()[0]).lower() in ("wal", "memory"):
        return
    try:
        cursor.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        logger.debug("another connection is switching the SQLite file to WAL: %s", exc)


def create_session_factory(engine: AsyncEngine) -> SessionFactory:
    # expire_on_commit=False: objects returned by a unit of work stay readable after it commits
    # (with lazy="raise" there is nothing to lazy-load anyway); autoflush off keeps the SQL a
    # repository emits exactly the SQL it asked for.
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def unit_of_work(
    factory: SessionFactory, *, read_only: bool = False
) -> AsyncIterator[AsyncSession]:
    """One transaction: committed when the block succeeds, rolled back when it raises.

    ``read_only`` is a promise that the block writes nothing; on SQLite it lets the transaction
    begin DEFERRED so it does not wait for (or hold up) writers. It is never committed: closing
    the session ends the transaction without expiring the objects loaded in it (an explicit
    rollback would expire them, and they could not be read after the block).
    """
    session = factory()
    try:
        if read_only:
            await session.connection(execution_options={READ_ONLY: True})
        try:
            yield session
            if not read_only:
                await session.commit()
        except BaseException as exc:
            await session.rollback()
            collision = sequence_collision(exc)
            if collision is not None:  # a session's counters behind its rows: say how to repair
                raise collision from exc
            raise
    finally:
        await _close(session)


async def _close(session: AsyncSession) -> None:
    # ``async with session`` closes in a task of its own, shielded, so that a cancellation
    # cannot abandon a close that waits on the network (and return the connection to a pool
    # disposed of meanwhile): a new task and three turns of the event loop per transaction.
    # On SQLite nothing of a close waits (``sqlite_driver``), so nothing can interrupt it.
    if session.sync_session.get_bind().dialect.name == "sqlite":
        await session.close()
    else:
        await _run_to_completion(session.close())


# ``Session.info`` keys: values kept for the current transaction, and callbacks for its commit.
_TRANSACTION_VALUES = "ctxsvc_transaction_values"
_ON_COMMIT = "ctxsvc_on_commit"


def transaction_values(session: AsyncSession | Session) -> dict[str, Any]:
    """A dict for what code wants to remember during the session's current transaction. Its
    values (each with a ``clear()``) are emptied when the transaction or a savepoint ends
    (rolling back to a savepoint can undo what they describe), but not at the end of the inner
    transaction the ORM wraps every flush in. ``session`` may be the sync ``Session`` an event
    listener receives."""
    info = (session.sync_session if isinstance(session, AsyncSession) else session).info
    values: dict[str, Any] | None = info.get(_TRANSACTION_VALUES)
    if values is None:
        values = info[_TRANSACTION_VALUES] = {}
    return values


def on_commit(session: AsyncSession, callback: Callable[[], None]) -> None:
    """Call ``callback`` once the session's current transaction has committed (a savepoint's
    release is not the commit); it is forgotten if the transaction rolls back."""
    session.sync_session.info.setdefault(_ON_COMMIT, []).append(callback)


# Listeners on the Session class, registered once: per-session listeners would cost an event
# registration in every transaction.
@event.listens_for(Session, "after_commit")
def _run_on_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return
    for callback in session.info.pop(_ON_COMMIT, ()):
        callback()


@event.listens_for(Session, "after_transaction_end")
def _forget_transaction_state(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None or transaction.nested:
        for value in session.info.get(_TRANSACTION_VALUES, {}).values():
            value.clear()
    if transaction.parent is None:
        session.info.pop(_ON_COMMIT, None)  # rolled back (after a commit it is gone already)
