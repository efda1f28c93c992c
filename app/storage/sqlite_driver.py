"""SQLAlchemy's aiosqlite dialect over sqlite3 called inline, on the event loop's thread.

aiosqlite runs every sqlite3 call on a worker thread and wakes the event loop when it is done.
That trip costs some 160 µs of wall time (80 µs of it on the loop's thread) against a few µs
for the small indexed statements this service runs, and a model call of the turn loop runs about
ten of them. So this adapter calls sqlite3 directly: a statement blocks the loop for as long as
SQLite takes to run it, which for these statements is less than the trip it replaces.

What made the thread necessary is waiting, and there is none left on the loop's thread:

- Writers in this process queue on an ``asyncio.Lock`` per database file, taken before
  ``BEGIN IMMEDIATE`` and released by commit or rollback, so a transaction never waits for
  SQLite's write lock while the holder is in this process (it would never get to run again).
- Another process's writer is waited for asynchronously: ``BEGIN IMMEDIATE`` runs with a zero
  busy timeout and is retried after short sleeps until the connection's busy timeout has passed.
- Every other statement keeps the connection's busy timeout: in WAL mode readers do not wait for
  writers, and a writer holding the write lock does not wait for anyone.

The connection also skips ROLLBACK when no transaction is open (the pool rolls back every
connection it takes back, also right after a commit). Everything else is SQLAlchemy's.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
import weakref
from typing import Any

from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

__all__ = ["inline_dbapi"]

_BEGIN_WRITE = "BEGIN IMMEDIATE"
# Sleeps between attempts to begin a write transaction while another process writes.
_FIRST_RETRY_SECONDS = 0.001
_MAX_RETRY_SECONDS = 0.05

# One writer lock per event loop and database file.
_writer_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _writer_lock(database: str) -> asyncio.Lock:
    locks = _writer_locks.setdefault(asyncio.get_running_loop(), {})
    lock = locks.get(database)
    if lock is None:
        lock = locks[database] = asyncio.Lock()
    return lock


async def _done() -> None:
    pass


async def _acquire(lock: asyncio.Lock, seconds: float) -> None:
    # ``asyncio.timeout``, not ``wait_for``: no task, and a free lock is taken without a turn
    # of the event loop.
    async with asyncio.timeout(seconds):
        await lock.acquire()


class _InlineCursor(AsyncAdapt_aiosqlite_cursor):
    __slots__ = ("_description", "_inline", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: _InlineConnection) -> None:
        self._adapt_connection = adapt_connection
        self._inline = adapt_connection
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
        pass  # the rows are fetched with the statement: nothing is left open

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        adapt = self._inline
        try:
            if operation == _BEGIN_WRITE:
                adapt.begin_write()
            else:
                self._run(operation, parameters, many=False)
        except Exception as error:
            adapt._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        try:
            self._run(operation, seq_of_parameters, many=True)
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def _run(self, operation: Any, parameters: Any, *, many: bool) -> None:
        # SQLAlchemy's AsyncConnection checks that a statement awaited something (a sync driver
        # passed by mistake would block the loop): this one does so on purpose, and says so
        # with an await that completes at once (a switch of greenlets, not of event-loop turns).
        await_(_done())
        cursor = self._inline.sqlite.cursor()
        try:
            if many:
                cursor.executemany(operation, parameters)
            elif parameters is None:
                cursor.execute(operation)
            else:
                cursor.execute(operation, parameters)
            description = cursor.description
            rows = cursor.fetchall() if description else ()
            self._description, self._rowcount = description, cursor.rowcount
            self._lastrowid = cursor.lastrowid
            self._rows = collections.deque(rows)
        finally:
            cursor.close()


class _InlineConnection(AsyncAdapt_aiosqlite_connection):
    """``_connection`` is the sqlite3 connection itself."""

    __slots__ = ("database", "held_lock")

    def __init__(self, dbapi: Any, connection: sqlite3.Connection, database: str) -> None:
        super().__init__(dbapi, connection)  # type: ignore[arg-type]
        self.database = database
        self.held_lock: asyncio.Lock | None = None

    @property
    def sqlite(self) -> sqlite3.Connection:
        return self._connection  # type: ignore[return-value]

    def cursor(self, server_side: bool = False) -> _InlineCursor:
        return _InlineCursor(self)

    @property
    def isolation_level(self) -> str | None:
        return self.sqlite.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self.sqlite.isolation_level = value  # type: ignore[assignment]

    def create_function(self, *args: Any, **kw: Any) -> None:
        self.sqlite.create_function(*args, **kw)

    def begin_write(self) -> None:
        """``BEGIN IMMEDIATE`` once this process's other writers of the file are done and no
        other process holds the write lock, waiting (asynchronously) at most the busy timeout."""
        (busy_timeout_ms,) = self.sqlite.execute("PRAGMA busy_timeout").fetchone()
        timeout = busy_timeout_ms / 1000
        lock = _writer_lock(self.database)
        try:
            await_(_acquire(lock, timeout))
        except TimeoutError:
            raise sqlite3.OperationalError("database is locked") from None
        self.held_lock = lock
        try:
            await_(self._begin_immediate(asyncio.get_running_loop().time() + timeout))
        except BaseException:
            self._release()
            raise
        finally:
            self.sqlite.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")

    async def _begin_immediate(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        delay = _FIRST_RETRY_SECONDS
        self.sqlite.execute("PRAGMA busy_timeout = 0")
        while True:
            try:
                self.sqlite.execute(_BEGIN_WRITE)
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or loop.time() >= deadline:
                    raise
            await asyncio.sleep(min(delay, max(deadline - loop.time(), 0)))
            delay = min(delay * 2, _MAX_RETRY_SECONDS)

    def _release(self) -> None:
        lock, self.held_lock = self.held_lock, None
        if lock is not None:
            lock.release()

    def commit(self) -> None:
        self._end("COMMIT")

    def rollback(self) -> None:
        # Also called by the pool for every connection it takes back, right after a commit
        # too: with no transaction open there is nothing to send.
        self._end("ROLLBACK")

    def _end(self, statement: str) -> None:
        try:
            if self.sqlite.in_transaction:
                self.sqlite.execute(statement)
        except Exception as error:
            self._handle_exception(error)
        finally:
            # Whatever happened, SQLite ended the transaction or still holds it for the next
            # ROLLBACK; the in-process queue moves on only when none is open.
            if not self.sqlite.in_transaction:
                self._release()

    def close(self) -> None:
        try:
            self.sqlite.close()
        finally:
            self._release()

    def terminate(self) -> None:
        self.close()


class _InlineDBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> _InlineConnection:
        kw.pop("async_creator_fn", None)
        # The pool may hand a connection to another task than the one that opened it, and
        # nothing touches it from two threads at once.
        kw["check_same_thread"] = False
        database = str(arg[0] if arg else kw.get("database", ""))
        connection = sqlite3.connect(*arg, **kw)
        return _InlineConnection(self, connection, database)


def inline_dbapi() -> Any:
    """The DBAPI module to pass as ``module=`` to ``create_async_engine`` for aiosqlite URLs
    (aiosqlite itself is not used: its exceptions are sqlite3's, which this module raises)."""
    return _InlineDBAPI(sqlite3, sqlite3)
