"""A write refused because its sequence is taken: the session's allocators are behind its rows.

A session hands out message and event sequences from two counters on its row
(``last_message_sequence``, ``last_event_sequence``). They can only fall behind the rows they
number when the database was changed past the service (a partial restore, a hand edit); then
every write of the session collides with a stored row, for ever. ``unit_of_work`` turns that
collision into 409 ``sequence_conflict`` naming the repair — ``POST /v1/sessions/{id}/reload``
raises the counters to the stored maxima (``SessionRepository.resync_sequences``) — instead of
an internal error.
"""

from __future__ import annotations

import re

from sqlalchemy.exc import IntegrityError

from app.core.errors import Conflict

__all__ = ["sequence_collision"]

# The tables numbered by a session counter; their primary key is (session_id, sequence).
_TABLES = ("messages", "session_events")
# SQLite names the columns of the constraint that refused the row.
_SQLITE = re.compile(r"UNIQUE constraint failed: (\w+)\.session_id, \1\.sequence")


def _collided_table(exc: IntegrityError) -> str | None:
    orig = exc.orig
    diag = getattr(orig, "diag", None)  # psycopg: the server says which constraint
    if diag is not None and getattr(orig, "sqlstate", None) == "23505":
        table = diag.table_name
        return table if table in _TABLES and diag.constraint_name == f"pk_{table}" else None
    found = _SQLITE.search(str(orig))
    if found is not None and found.group(1) in _TABLES:
        return found.group(1)
    return None


def sequence_collision(exc: BaseException) -> Conflict | None:
    """The ``sequence_conflict`` to raise for ``exc`` (``None``: not such a collision)."""
    # Statements and deferred writes alike reach here as SQLAlchemy's IntegrityError.
    table = _collided_table(exc) if isinstance(exc, IntegrityError) else None
    if table is None:
        return None
    what = "message" if table == "messages" else "event"
    return Conflict(
        "sequence_conflict",
        f"the session's next {what} sequence is already taken: its stored counters are behind "
        "its rows (the database was changed past the service); nothing was written. POST "
        "/v1/sessions/{session_id}/reload raises them to the stored rows, then send this again",
    )
