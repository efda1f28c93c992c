"""Committed writes: the one proof that a write outage is over (spec §8).

A read-only or a full database fails writes while reads still work, so a readiness probe (a
read) cannot see it end: ``app.storage.outages.Outages`` holds readiness off until a write is
committed. What counts is a transaction that wrote (an INSERT, UPDATE or DELETE that changed a
row, sent through SQLAlchemy or as a deferred write, ``app.storage.deferred``) and whose COMMIT
succeeded — not a request that answered 2xx: ``POST /v1/tokens/count`` or ``POST /v1/prepare``
write nothing, and a transaction that only read commits even on a full disk.

``notify_committed_writes(engine, callback)`` calls ``callback`` after every such commit of a
session bound to ``engine``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["mark_written", "notify_committed_writes"]

# Key in the pooled connection's ``info``: the current transaction sent a write.
_WROTE = "ctxsvc_transaction_wrote"
# Key in ``Session.info``: the watched connections of its transaction (info dict, callback).
_WATCHED = "ctxsvc_watched_writes"
_callbacks: weakref.WeakKeyDictionary[Engine, Callable[[], None]] = weakref.WeakKeyDictionary()


def mark_written(connection: Connection) -> None:
    """The current transaction on ``connection`` sent a write past SQLAlchemy's execution
    events (``app.storage.deferred``)."""
    if connection.engine in _callbacks:
        connection.info[_WROTE] = True


def notify_committed_writes(engine: AsyncEngine, callback: Callable[[], None]) -> None:
    """Call ``callback`` after each committed transaction of ``engine`` that wrote a row."""
    sync_engine = engine.sync_engine
    _callbacks[sync_engine] = callback

    @event.listens_for(sync_engine, "after_cursor_execute")
    def _after_statement(
        connection: Connection,
        cursor: Any,
        _statement: str,
        _parameters: Any,
        context: Any,
        _executemany: bool,
    ) -> None:
        if context is None or not (context.isinsert or context.isupdate or context.isdelete):
            return
        # An UPDATE or DELETE that matched nothing wrote nothing (it commits on a full disk
        # too). With RETURNING, SQLite counts the rows only once they are fetched: a write.
        compiled = context.compiled
        returning = compiled is not None and bool(getattr(compiled, "effective_returning", None))
        if returning or cursor.rowcount != 0:
            connection.info[_WROTE] = True


# On the Session class, registered once (as ``app.storage.database`` does): the callback is
# looked up by the connection's engine, so engines nobody watches cost one dictionary lookup.
@event.listens_for(Session, "after_begin")
def _watch_transaction(
    session: Session, transaction: SessionTransaction, connection: Connection
) -> None:
    if transaction.nested:
        return  # a savepoint: the root transaction's watch covers it (and its writes)
    callback = _callbacks.get(connection.engine)
    if callback is None:
        return
    info = connection.info  # the pooled connection's: read after the commit, before release
    info.pop(_WROTE, None)
    session.info.setdefault(_WATCHED, []).append((info, callback))


@event.listens_for(Session, "after_commit")
def _report_committed_writes(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint's release is not the commit
    for info, callback in session.info.pop(_WATCHED, ()):
        if info.pop(_WROTE, False):
            callback()


@event.listens_for(Session, "after_transaction_end")
def _forget_watch(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_WATCHED, None)  # rolled back (after a commit it is gone already)
