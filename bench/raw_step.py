"""One step-shaped transaction through the raw driver: the database part of a turn step's floor
(``bench/floors_turn.py``).

What a durable tool step must store, in one transaction: the assistant's message with its tool
call and the tool's result (two message rows, JSON content), the model call's record, one event,
and the session's row moved on: BEGIN, 5 statements, COMMIT. SQLite: ``sqlite3`` on a WAL file
with ``synchronous = NORMAL`` (the service's pragmas, ``app/storage/database.py``); PostgreSQL:
``psycopg`` in pipeline mode (one round trip for the lot). Tables of its own, beside the
service's, in the same database.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import psycopg

__all__ = ["RawStep"]

_TABLES = (
    "CREATE TABLE IF NOT EXISTS floor_sessions (id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS floor_messages (session_id TEXT NOT NULL, seq BIGINT NOT NULL,"
    " role TEXT NOT NULL, content TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    "CREATE TABLE IF NOT EXISTS floor_calls (session_id TEXT NOT NULL, seq BIGINT NOT NULL,"
    " usage TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    "CREATE TABLE IF NOT EXISTS floor_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL,"
    " payload TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
)
_CALL = json.dumps(
    [{"type": "tool_use", "id": "call-1", "name": "update_plan", "input": {"plan": ["step"]}}]
)
_RESULT = json.dumps([{"type": "tool_result", "tool_use_id": "call-1", "content": "ok"}])
_USAGE = json.dumps({"input_tokens": 1000, "output_tokens": 20})
_EVENT = json.dumps({"type": "model_call.completed", "call": 1})


class RawStep:
    """``step()`` runs one step-shaped transaction; ``close()`` ends the connection."""

    def __init__(self, backend: str, target: str) -> None:
        """``target``: a file path (SQLite) or a libpq URL (PostgreSQL)."""
        self.backend = backend
        self._seq = 0
        self._pg: psycopg.Connection[Any] | None = None
        self._sqlite: sqlite3.Connection | None = None
        if backend == "sqlite":
            self._sqlite = sqlite3.connect(target, isolation_level=None)
            self._sqlite.execute("PRAGMA journal_mode = WAL")
            self._sqlite.execute("PRAGMA synchronous = NORMAL")
            for ddl in _TABLES:
                self._sqlite.execute(ddl)
            self._sqlite.execute("INSERT OR IGNORE INTO floor_sessions VALUES ('s', 0)")
        else:
            self._pg = psycopg.connect(target, autocommit=False)
            for ddl in _TABLES:
                self._pg.execute(ddl)
            self._pg.execute("INSERT INTO floor_sessions VALUES ('s', 0) ON CONFLICT DO NOTHING")
            self._pg.commit()

    def step(self) -> None:
        self._seq += 2
        seq = self._seq
        if self._sqlite is not None:
            db = self._sqlite
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO floor_messages VALUES ('s', ?, 'assistant', ?)", (seq, _CALL))
            db.execute("INSERT INTO floor_messages VALUES ('s', ?, 'tool', ?)", (seq + 1, _RESULT))
            db.execute("INSERT INTO floor_calls VALUES ('s', ?, ?)", (seq, _USAGE))
            db.execute("INSERT INTO floor_events VALUES ('s', ?, ?)", (seq, _EVENT))
            db.execute("UPDATE floor_sessions SET last_seq = ? WHERE id = 's'", (seq + 1,))
            db.execute("COMMIT")
            return
        assert self._pg is not None
        pg = self._pg
        with pg.pipeline():
            pg.execute("INSERT INTO floor_messages VALUES ('s', %s, 'assistant', %s)", (seq, _CALL))
            pg.execute(
                "INSERT INTO floor_messages VALUES ('s', %s, 'tool', %s)", (seq + 1, _RESULT)
            )
            pg.execute("INSERT INTO floor_calls VALUES ('s', %s, %s)", (seq, _USAGE))
            pg.execute("INSERT INTO floor_events VALUES ('s', %s, %s)", (seq, _EVENT))
            pg.execute("UPDATE floor_sessions SET last_seq = %s WHERE id = 's'", (seq + 1,))
            pg.commit()

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
        if self._pg is not None:
            self._pg.close()
