"""The prebuilt statements ``SessionRepository`` reads and writes a session row with, the keys
it keeps in a transaction's values, and the commit hook that writes a row's kept counts with one
prebuilt UPDATE (``SessionRepository.defer_counters``)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import ColumnElement, Table, bindparam, event, inspect, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import ReturningUpdate

from app.storage.database import transaction_values
from app.storage.deferred import queue_write_sync
from app.storage.models import AgentSession
from app.storage.repositories.turn_usage import PROXIED_COLUMNS

__all__ = [
    "ADD_MAILBOX_PENDING",
    "ADD_OPEN_TOOL_CALLS",
    "ALLOCATE_EVENTS",
    "ALLOCATE_MESSAGES",
    "CURRENT",
    "DEFERRED",
    "GET",
    "GET_FOR_UPDATE",
    "LOCK",
    "LOCKED",
    "SESSIONS",
    "SET_LATEST_COMPACTION",
    "SET_PIN_COUNT",
    "SET_WORLD_STATE_VERSION",
]

SESSIONS = cast(Table, AgentSession.__table__)
ALLOCATE_EVENTS = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("k_id"))
    .values(
        last_event_sequence=SESSIONS.c.last_event_sequence
        + bindparam("v_count", type_=SESSIONS.c.last_event_sequence.type),
        updated_at=bindparam("v_updated_at", type_=SESSIONS.c.updated_at.type),
    )
    .returning(SESSIONS.c.last_event_sequence)
)
ALLOCATE_MESSAGES = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("k_id"))
    .values(
        last_message_sequence=SESSIONS.c.last_message_sequence
        + bindparam("v_count", type_=SESSIONS.c.last_message_sequence.type),
        updated_at=bindparam("v_updated_at", type_=SESSIONS.c.updated_at.type),
    )
    .returning(SESSIONS.c.last_message_sequence)
)


GET = select(AgentSession).where(AgentSession.id == bindparam("k_id"))
GET_FOR_UPDATE = GET.with_for_update()
LOCK = select(AgentSession.id).where(AgentSession.id == bindparam("k_id")).with_for_update()


def summary_update(column: str, value: ColumnElement[Any]) -> ReturningUpdate[Any]:
    # The summary columns describe other tables, not the session: ``updated_at`` keeps its value
    # (assigned to itself, so the column's Python ``onupdate`` does not fire).
    return (
        update(SESSIONS)
        .where(SESSIONS.c.id == bindparam("k_id"))
        .values({column: value, "updated_at": SESSIONS.c.updated_at})
        .returning(SESSIONS.c[column])
    )


def value_param(column: str) -> ColumnElement[Any]:
    return bindparam("v_value", type_=SESSIONS.c[column].type)


ADD_MAILBOX_PENDING = summary_update(
    "mailbox_pending", SESSIONS.c.mailbox_pending + value_param("mailbox_pending")
)
ADD_OPEN_TOOL_CALLS = summary_update(
    "open_tool_calls", SESSIONS.c.open_tool_calls + value_param("open_tool_calls")
)
SET_LATEST_COMPACTION = summary_update("latest_compaction_id", value_param("latest_compaction_id"))
SET_WORLD_STATE_VERSION = summary_update("world_state_version", value_param("world_state_version"))
SET_PIN_COUNT = summary_update("pin_count", value_param("pin_count"))

# Keys in ``Session.info``: the sessions whose row this transaction already holds locked, and
# those whose loaded object was built by a locking read (see ``is_current``).
LOCKED = "ctxsvc_locked_sessions"
CURRENT = "ctxsvc_current_sessions"
# The sessions whose sequence counters this transaction counts in memory (``defer_counters``).
DEFERRED = "ctxsvc_deferred_counters"

# The counts a deferring transaction keeps on the object, written with one prebuilt UPDATE.
KEPT_COLUMNS = ("last_message_sequence", "last_event_sequence", "open_tool_calls", "updated_at")
# A proxied call's usage (``add_usage``), kept the same way by the write storing its answer.
USAGE_NAMES = frozenset(PROXIED_COLUMNS)
KEPT_NAMES = frozenset(KEPT_COLUMNS) | USAGE_NAMES


def _write_kept(columns: tuple[str, ...]) -> Any:
    return (
        update(SESSIONS)
        .where(SESSIONS.c.id == bindparam("k_id"))
        .values({name: bindparam(f"v_{name}", type_=SESSIONS.c[name].type) for name in columns})
    )


# A turn step writes the counts alone; the usage columns only when a proxied call added to them.
_WRITE_KEPT = _write_kept(KEPT_COLUMNS)
_WRITE_KEPT_USAGE = _write_kept(KEPT_COLUMNS + PROXIED_COLUMNS)


def _kept_params(row: AgentSession, columns: tuple[str, ...]) -> dict[str, Any]:
    params = {f"v_{name}": getattr(row, name) for name in columns}
    params["k_id"] = row.id
    return params


@event.listens_for(Session, "before_commit")
def _write_kept_counts(session: Session) -> None:
    # Before the commit's flush (or a savepoint's release), one prebuilt UPDATE per row whose
    # kept counts are its only change, and the object is marked clean: the ORM's flush machinery
    # costs several times the statement. Anything else (a savepoint's start, another change of
    # the row) leaves the counts to the ORM's flush as before.
    deferred: dict[str, AgentSession] | None = transaction_values(session).get(DEFERRED)
    if not deferred:
        return
    for session_id in sorted(deferred):
        row = deferred[session_id]
        state = inspect(row)
        if not state.modified or not KEPT_NAMES.issuperset(state.committed_state):
            continue
        if USAGE_NAMES.isdisjoint(state.committed_state):
            stmt, params = _WRITE_KEPT, _kept_params(row, KEPT_COLUMNS)
        else:
            stmt, params = _WRITE_KEPT_USAGE, _kept_params(row, KEPT_COLUMNS + PROXIED_COLUMNS)
        if not queue_write_sync(session, stmt, params):
            session.execute(stmt, params)
        # Private (SQLAlchemy pinned <2.2): what a flush does to the objects it wrote.
        state._commit_all(state.dict, session.identity_map)
