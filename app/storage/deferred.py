"""Deferred writes: a transaction's writes that no later statement of it reads, sent together.

A turn step writes five or six statements whose results nobody reads (the messages, their tool
calls, the live updates, the prefix record, the session's counters) and one whose result is only
checked (the turn's UPDATE: still running? cancel requested?). Each costs a round trip on
PostgreSQL and SQLAlchemy's execution path on both backends. A transaction that calls ``defer``
queues such writes instead (``write``, ``checked_write``) and they are sent in order:

- before any other statement runs on the connection (a read must see them: the queue is
  flushed first, as an ORM autoflush would), and
- at commit, just before the COMMIT;

on PostgreSQL in one psycopg pipeline (one round trip for all of them), on SQLite straight to
sqlite3 on the event loop's thread (``sqlite_driver``). A rollback discards the queue. Each
statement is compiled once per dialect and set of keys (its SQL text and SQLAlchemy's own bind
processors, so values are stored exactly as ``Session.execute`` stores them), and only
statements that need nothing of SQLAlchemy's execution context are accepted: every column value
given (no Python-side defaults to fill in), no RETURNING but for ``checked_write``.

Statements sent this way pass no SQLAlchemy execution event: ``observe_flushes`` lets the
tracing give each flush its own span (``app.observability.tracing``).

A failure of a queued statement surfaces where the queue is flushed (the next statement or the
commit) as the ``sqlalchemy.exc.DBAPIError`` that ``Session.execute`` would have raised.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import bindparam, event
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert
from sqlalchemy.util.concurrency import await_

from app.storage.committed_writes import mark_written

__all__ = [
    "Check",
    "FlushObserver",
    "checked_write",
    "defer",
    "install",
    "observe_flushes",
    "queue_write_sync",
    "write",
]

# One row of values, or several (executemany).
Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
# Called with the first row a checked write returned (``None``: no row) once it ran.
Check = Callable[[Sequence[Any] | None], None]

# Wraps one flush: given the connection and the SQL of each statement, in order.
FlushObserver = Callable[[Connection, Sequence[str]], AbstractContextManager[object]]

_QUEUE = "ctxsvc_deferred_writes"
_observers: weakref.WeakKeyDictionary[Engine, FlushObserver] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class _Compiled:
    """One statement for one dialect and set of keys: its SQL and how to bind a row of values."""

    sql: str
    compiled: Any  # sqlalchemy.sql.compiler.SQLCompiler
    order: tuple[str, ...] | None  # positional dialects: the binds in order
    processors: Mapping[str, Callable[[Any], Any]]

    def bind(self, values: Mapping[str, Any]) -> Any:
        params = self.compiled.construct_params(values)
        processors = self.processors
        if self.order is not None:
            return tuple(
                processors[k](params[k]) if k in processors else params[k] for k in self.order
            )
        return {k: processors[k](v) if k in processors else v for k, v in params.items()}


# The compiled form of each deferred statement, per dialect and set of bound keys. The statements
# are module-level constants (a few dozen), so this stays small; the bound makes that explicit
# should a caller ever pass statements built per call: past it, everything is compiled afresh
# (compiling one costs about what a write's round trip does).
COMPILED_STATEMENTS = 256
_compiled: dict[tuple[int, str, frozenset[str]], tuple[Executable, _Compiled]] = {}


def _compile(stmt: Executable, dialect: Dialect, keys: frozenset[str]) -> _Compiled:
    key = (id(stmt), dialect.name, keys)
    known = _compiled.get(key)
    if known is not None and known[0] is stmt:
        return known[1]
    compiled: Any = cast(Any, stmt).compile(dialect=dialect, column_keys=sorted(keys))
    if compiled.insert_prefetch or compiled.update_prefetch:
        # A column default SQLAlchemy would compute: pass the value instead.
        missing = [c.key for c in (*compiled.insert_prefetch, *compiled.update_prefetch)]
        raise ValueError(f"deferred write without values for {missing}: {compiled.string}")
    order = tuple(compiled.positiontup) if compiled.positional else None
    made = _Compiled(compiled.string, compiled, order, dict(compiled._bind_processors))
    # Keyed by id with the statement kept alive: the statements are module-level constants.
    if len(_compiled) >= COMPILED_STATEMENTS:
        _compiled.clear()
    _compiled[key] = (stmt, made)
    return made


# Rows of a plain INSERT sent as one multi-row ``INSERT ... VALUES (...), (...)`` statement
# instead of an executemany of one statement per row: a turn step's live updates (six or seven
# rows) and its messages cost one statement each, not one per row. Chunks of at most this many
# rows: one compiled form per row count up to it, per statement (far below SQLite's 32 766 and
# PostgreSQL's 65 535 bound parameters for any of this service's tables).
MULTIROW_CHUNK = 16


@dataclass(frozen=True, slots=True)
class _MultiRow:
    """A plain INSERT of ``n`` rows in one statement: its SQL, and where each bound value of
    the single-row form goes (positional: concatenated rows; named: ``<key>_m<row>``)."""

    sql: str
    # Named dialects: per row, each bind's name in the statement and its single-row key.
    names: tuple[tuple[tuple[str, str], ...], ...] | None


def _multirow_insertable(stmt: Executable) -> bool:
    """A plain ``insert(table)``: no values, no ON CONFLICT, no RETURNING of its own."""
    if not isinstance(stmt, Insert):
        return False
    plain: Any = stmt
    return (
        not plain._values
        and not plain._multi_values
        and plain._post_values_clause is None
        and not plain._returning
        and plain.select is None
    )


def _compile_rows(stmt: Executable, dialect: Dialect, keys: frozenset[str], n: int) -> _MultiRow:
    key = (id(stmt), dialect.name, keys, n)
    known = _multirow.get(key)
    if known is not None and known[0] is stmt:
        return known[1]
    insert: Any = stmt
    table = insert.table
    ordered = sorted(keys)
    rows = [{k: bindparam(f"{k}_m{i}", type_=table.c[k].type) for k in ordered} for i in range(n)]
    compiled: Any = insert.values(rows).compile(dialect=dialect)
    names = tuple(tuple((f"{k}_m{i}", k) for k in ordered) for i in range(n))
    made = _MultiRow(compiled.string, None if compiled.positional else names)
    if len(_multirow) >= COMPILED_STATEMENTS:
        _multirow.clear()
    _multirow[key] = (stmt, made)
    return made


_multirow: dict[tuple[int, str, frozenset[str], int], tuple[Executable, _MultiRow]] = {}


@dataclass(slots=True)
class _Write:
    compiled: _Compiled
    params: list[Any]
    many: bool
    check: Check | None


class _Queue:
    """The writes queued on one connection's transaction, in order."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.dialect = connection.dialect
        self.items: list[_Write] = []

    def clear(self) -> None:
        # Also called when the transaction (or a savepoint) ends: anything left is discarded.
        self.items.clear()

    def flush(self) -> None:
        """Run what is queued (in SQLAlchemy's greenlet: an async driver is awaited)."""
        if not self.items:
            return
        items, self.items = self.items, []
        dbapi_connection: Any = self.connection.connection.dbapi_connection
        observer = _observers.get(self.connection.engine)
        observed = (
            contextlib.nullcontext()
            if observer is None
            else observer(self.connection, [item.compiled.sql for item in items])
        )
        try:
            with observed:
                if self.dialect.name == "postgresql":
                    await_(_flush_psycopg(dbapi_connection._connection, items))
                else:
                    _flush_sqlite(dbapi_connection.sqlite, items)
            mark_written(self.connection)
        except DBAPIError:
            raise
        except self.dialect.loaded_dbapi.Error as exc:
            raise DBAPIError.instance(
                items[0].compiled.sql, None, exc, self.dialect.loaded_dbapi.Error
            ) from exc


def _flush_sqlite(sqlite: Any, items: list[_Write]) -> None:
    for item in items:
        if item.many:
            sqlite.executemany(item.compiled.sql, item.params)
            continue
        cursor = sqlite.execute(item.compiled.sql, item.params[0])
        try:
            row = cursor.fetchone() if item.check is not None else None
        finally:
            cursor.close()
        if item.check is not None:
            item.check(row)


async def _flush_psycopg(pg: Any, items: list[_Write]) -> None:
    checked = []
    # One round trip for the lot: results are read once the pipeline has synced (its exit
    # raises the first error).
    async with pg.pipeline():
        for item in items:
            cursor = pg.cursor()
            if item.many:
                await cursor.executemany(item.compiled.sql, item.params)
            else:
                await cursor.execute(item.compiled.sql, item.params[0])
            if item.check is not None:
                checked.append((cursor, item.check))
    for cursor, check in checked:
        check(await cursor.fetchone())


def install(engine: AsyncEngine) -> None:
    """Flush a connection's queue before every other statement and before COMMIT; discard it
    on rollback (``create_engine`` installs this on every engine)."""

    @event.listens_for(engine.sync_engine, "before_execute")
    def _before_execute(connection: Connection, *_: Any) -> None:
        queue = _queue_on(connection)
        if queue is not None:
            queue.flush()

    @event.listens_for(engine.sync_engine, "commit")
    def _before_commit(connection: Connection) -> None:
        queue = _queue_on(connection, pop=True)
        if queue is not None:
            queue.flush()

    @event.listens_for(engine.sync_engine, "rollback")
    def _on_rollback(connection: Connection) -> None:
        queue = _queue_on(connection, pop=True)
        if queue is not None:
            queue.clear()

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # Closed without a commit or a rollback of its own (the pool's reset rolls back).
        queue: _Queue | None = record.info.pop(_QUEUE, None)
        if queue is not None:
            queue.clear()


def observe_flushes(engine: AsyncEngine, observer: FlushObserver) -> None:
    """Wrap every flush of ``engine``'s queues in ``observer`` (one per engine)."""
    _observers[engine.sync_engine] = observer


def _queue_on(connection: Connection, *, pop: bool = False) -> _Queue | None:
    # An invalidated connection (its server went away) has no DBAPI connection to ask, and
    # the queue went with the pool's record (``checkin``); so has a closed one (the session's
    # earlier transaction, after a session is used for another).
    if connection.closed or connection.invalidated:
        return None
    info = connection.info
    queue: _Queue | None = info.pop(_QUEUE, None) if pop else info.get(_QUEUE)
    return queue


def _info(session: AsyncSession | Session) -> dict[str, Any]:
    return (session.sync_session if isinstance(session, AsyncSession) else session).info


async def defer(session: AsyncSession) -> None:
    """From now until it ends, ``session``'s transaction queues ``write``s (it begins now)."""
    if _queue_of(session) is not None:
        return
    connection = (await session.connection()).sync_connection
    assert connection is not None
    queue = _Queue(connection)
    connection.info[_QUEUE] = queue
    _info(session)[_QUEUE] = queue


def _queue_of(session: AsyncSession | Session) -> _Queue | None:
    """The queue of the session's transaction; ``None`` when it does not defer (a queue left
    from an earlier transaction of the session is no longer its connection's)."""
    queue: _Queue | None = _info(session).get(_QUEUE)
    if queue is None or _queue_on(queue.connection) is not queue:
        return None
    return queue


async def write(session: AsyncSession, stmt: Executable, params: Params) -> None:
    """Run ``stmt`` with ``params`` (one row, or several: executemany), queued when the
    transaction defers writes, else at once."""
    queue = _queue_of(session)
    if queue is None:
        await session.execute(stmt, params)
        return
    _enqueue(queue, stmt, params, None)


def queue_write_sync(session: Session, stmt: Executable, params: Params) -> bool:
    """For code running inside SQLAlchemy (a ``before_commit`` listener, given the sync
    ``Session``): queue ``stmt`` if the transaction defers writes; ``False`` if it does not."""
    queue = _queue_of(session)
    if queue is None:
        return False
    _enqueue(queue, stmt, params, None)
    return True


async def checked_write(
    session: AsyncSession, stmt: Executable, params: Mapping[str, Any], check: Check
) -> None:
    """Run ``stmt`` (one row of ``params``, with a RETURNING clause) and hand its first row (or
    ``None``) to ``check`` — once it ran: later when the transaction defers writes. ``check``
    may raise; the statement that flushed the queue (or the commit) then raises it."""
    queue = _queue_of(session)
    if queue is None:
        check((await session.execute(stmt, params)).first())
        return
    _enqueue(queue, stmt, params, check)


def _enqueue(
    queue: _Queue,
    stmt: Executable,
    params: Params,
    check: Check | None,
) -> None:
    rows = [params] if isinstance(params, Mapping) else list(params)
    if not rows:
        return
    keys = frozenset(rows[0])
    compiled = _compile(stmt, queue.dialect, keys)
    bound = [compiled.bind(row) for row in rows]
    if len(bound) == 1 or check is not None or not _multirow_insertable(stmt):
        queue.items.append(_Write(compiled, bound, len(bound) > 1, check))
        return
    # Each row bound as the single-row statement binds it (the same processors, so the same
    # stored values), then laid out as the multi-row statement's parameters.
    for start in range(0, len(bound), MULTIROW_CHUNK):
        chunk = bound[start : start + MULTIROW_CHUNK]
        if len(chunk) == 1:
            queue.items.append(_Write(compiled, chunk, False, None))
            continue
        multi = _compile_rows(stmt, queue.dialect, keys, len(chunk))
        laid: Any
        if multi.names is None:
            laid = tuple(value for row in chunk for value in row)
        else:
            laid = {
                name: row[key]
                for names, row in zip(multi.names, chunk, strict=True)
                for name, key in names
            }
        sql = _Compiled(multi.sql, compiled.compiled, compiled.order, compiled.processors)
        queue.items.append(_Write(sql, [laid], False, None))
