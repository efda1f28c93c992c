"""SQLAlchemy's aiosqlite adapter with one worker-thread trip per statement.

aiosqlite runs every call of the sqlite3 driver on the connection's worker thread and wakes the
event loop when it is done. SQLAlchemy's adapter makes four such trips for one statement
(``cursor()``, ``execute()``, ``fetchall()``, ``close()``), and each trip costs far more than the
statement itself (about 70 µs against a few µs for a small indexed query): a model call of the
turn loop runs some twenty statements. This cursor does the four steps in one function on the
worker thread, through the same queue SQLAlchemy's own adapter already uses to set the isolation
level. The connection also skips the rollback trip when no transaction can be open (the pool
rolls back every connection it takes back, also right after a commit). Everything else
(connecting, commit, server-side cursors) is SQLAlchemy's.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import sqlite3
from typing import Any, cast

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

__all__ = ["one_trip_dbapi"]

# description, rowcount, lastrowid, rows (None when the statement returns no rows)
_Outcome = tuple[Any, int, int | None, list[Any] | None]


def _run(connection: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> _Outcome:
    """On the worker thread: the whole statement, rows included."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        rows = cursor.fetchall() if cursor.description else None
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class _OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: Any) -> None:
        # No aiosqlite cursor: the statement opens and closes its own on the worker thread.
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._rows = collections.deque()
        self._soft_closed_memoized = EMPTY_DICT
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        return self._lastrowid

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        pass  # nothing is open on the worker thread between statements

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        try:
            return await_(self._trip(operation, parameters, many=False))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        try:
            return await_(self._trip(operation, seq_of_parameters, many=True))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _trip(self, operation: Any, parameters: Any, *, many: bool) -> None:
        connection = cast(aiosqlite.Connection, self._connection)
        setattr(connection, _MAY_BE_IN_TRANSACTION, True)
        async with self._adapt_connection._execute_mutex:
            future: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
            work = functools.partial(_run, connection._conn, operation, parameters, many)
            connection._tx.put_nowait((future, work))
            description, rowcount, lastrowid, rows = await future
        self._description, self._rowcount, self._lastrowid = description, rowcount, lastrowid
        self._rows = collections.deque(rows) if rows is not None else collections.deque()


# Set on the aiosqlite connection by every statement, cleared by commit and rollback: the service
# begins every transaction with an explicit BEGIN (the driver's own transaction handling is off),
# so a connection with no statement since its last commit or rollback has no transaction open.
_MAY_BE_IN_TRANSACTION = "_ctxsvc_may_be_in_transaction"


class _OneTripConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = _OneTripCursor

    def commit(self) -> None:
        super().commit()
        setattr(self._connection, _MAY_BE_IN_TRANSACTION, False)

    def rollback(self) -> None:
        # The pool rolls back every connection it takes back, also right after a commit: that
        # would be one more worker-thread trip per transaction for nothing.
        if getattr(self._connection, _MAY_BE_IN_TRANSACTION, True):
            super().rollback()
            setattr(self._connection, _MAY_BE_IN_TRANSACTION, False)


class _OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> AsyncAdapt_aiosqlite_connection:
        adapted = super().connect(*arg, **kw)
        # Same slots, only the cursor class differs: re-class rather than repeat connect().
        adapted.__class__ = _OneTripConnection
        return adapted


def one_trip_dbapi() -> Any:
    """The DBAPI module to pass as ``module=`` to ``create_async_engine`` for aiosqlite URLs."""
    return _OneTripDBAPI(aiosqlite, sqlite3)
