"""The least a turn step can be on this stack: a FastAPI route (``bench/floors_minimal_turn.py``).

``POST /v1/sessions/{sid}/turns?messages=N&db=...`` answers a caller's turn request (the body
``bench/turns.py`` posts) with 5 model calls, each: one ``aiohttp`` POST of the same
conversation's body to the provider (built once per size, not per call), its stream read to the
end, then one transaction shaped like ``bench/raw_step.py``'s (the session row read under its
lock, two message rows, the call's record, one event, the session row moved on, COMMIT) on the
service's own engine (``app.storage.database``: same pragmas, same driver), by ``db``:
``session``, through an ``AsyncSession`` (the row read through the ORM, the writes executed one
by one); ``deferred``, the same with the writes queued and sent by the raw driver at the commit
(``app.storage.deferred``, as a turn step sends them); ``core``, the same statements on an
``AsyncConnection`` (SQLAlchemy Core, no ORM session); ``raw``, ``sqlite3`` / ``psycopg``
(pipelined) directly, as ``bench/raw_step.py`` but in this process, on its event loop;
``none``, no transaction. ``GET /bench/cpu`` gives the process's CPU time (all threads), as
``bench/floor_app.py`` does.

It does what the service cannot do less of (transport, a transaction, FastAPI's routing and
validation) and nothing else: no prepare, no provider adapter, no events hub, no observability,
no lease.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

import aiohttp
import psycopg
from fastapi import FastAPI, Request
from pydantic import BaseModel
from sqlalchemy import BigInteger, Text, bindparam, insert, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.storage.database import create_engine, create_session_factory, unit_of_work
from app.storage.deferred import defer, write
from bench.transport import conversation_body

CALLS = 5
_URL = os.environ["MINIMAL_DATABASE_URL"]
_PROVIDER = os.environ["MINIMAL_PROVIDER_URL"] + "/v1/chat/completions"
_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
_CALL = json.dumps(
    [{"type": "tool_use", "id": "call-1", "name": "update_plan", "input": {"plan": ["step"]}}]
)
_RESULT = json.dumps([{"type": "tool_result", "tool_use_id": "call-1", "content": "ok"}])
_USAGE = json.dumps({"input_tokens": 1000, "output_tokens": 20})
_EVENT = json.dumps({"type": "model_call.completed", "call": 1})


class _Base(DeclarativeBase):
    pass


class MinSession(_Base):
    __tablename__ = "min_sessions"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)


class MinMessage(_Base):
    __tablename__ = "min_messages"
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    role: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)


class MinCall(_Base):
    __tablename__ = "min_calls"
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    usage: Mapped[str] = mapped_column(Text)


class MinEvent(_Base):
    __tablename__ = "min_events"
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    payload: Mapped[str] = mapped_column(Text)


class TurnBody(BaseModel):
    client_request_id: str
    input: list[dict[str, Any]]


engine = create_engine(_URL)
factory = create_session_factory(engine)
app = FastAPI()
_bodies: dict[int, bytes] = {}
_http: list[aiohttp.ClientSession] = []
# The raw driver's connection (``db=raw``): sqlite3 on the event loop's thread, or psycopg's
# async connection.
_raw: list[Any] = []


@app.on_event("startup")
async def _start() -> None:
    async with engine.begin() as connection:
        await connection.run_sync(_Base.metadata.create_all)
    _http.append(aiohttp.ClientSession())
    if engine.dialect.name == "sqlite":
        path = engine.url.database
        assert path is not None
        raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = NORMAL")
        raw.execute("PRAGMA busy_timeout = 5000")
        _raw.append(raw)
    else:
        libpq = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        _raw.append(await psycopg.AsyncConnection.connect(libpq))


async def _raw_step(sid: str) -> None:
    """The same transaction through the raw driver, in this process (as ``bench/raw_step.py``
    runs it in the bench's)."""
    raw = _raw[0]
    if isinstance(raw, sqlite3.Connection):
        raw.execute("BEGIN IMMEDIATE")
        row = raw.execute("SELECT last_seq FROM min_sessions WHERE id = ?", (sid,)).fetchone()
        seq = (row[0] if row is not None else 0) + 2
        if row is None:
            raw.execute("INSERT INTO min_sessions VALUES (?, 0)", (sid,))
        raw.execute("INSERT INTO min_messages VALUES (?, ?, 'assistant', ?)", (sid, seq, _CALL))
        raw.execute("INSERT INTO min_messages VALUES (?, ?, 'tool', ?)", (sid, seq + 1, _RESULT))
        raw.execute("INSERT INTO min_calls VALUES (?, ?, ?)", (sid, seq, _USAGE))
        raw.execute("INSERT INTO min_events VALUES (?, ?, ?)", (sid, seq, _EVENT))
        raw.execute("UPDATE min_sessions SET last_seq = ? WHERE id = ?", (seq + 1, sid))
        raw.execute("COMMIT")
        return
    async with raw.transaction():
        cursor = await raw.execute(
            "SELECT last_seq FROM min_sessions WHERE id = %s FOR UPDATE", (sid,)
        )
        row = await cursor.fetchone()
        seq = (row[0] if row is not None else 0) + 2
        async with raw.pipeline():
            if row is None:
                await raw.execute("INSERT INTO min_sessions VALUES (%s, 0)", (sid,))
            await raw.execute(
                "INSERT INTO min_messages VALUES (%s, %s, 'assistant', %s)", (sid, seq, _CALL)
            )
            await raw.execute(
                "INSERT INTO min_messages VALUES (%s, %s, 'tool', %s)", (sid, seq + 1, _RESULT)
            )
            await raw.execute("INSERT INTO min_calls VALUES (%s, %s, %s)", (sid, seq, _USAGE))
            await raw.execute("INSERT INTO min_events VALUES (%s, %s, %s)", (sid, seq, _EVENT))
            await raw.execute("UPDATE min_sessions SET last_seq = %s WHERE id = %s", (seq + 1, sid))


@app.get("/bench/cpu")
async def cpu() -> dict[str, float]:
    return {"cpu": time.process_time()}


_INSERT_MESSAGES = insert(MinMessage)
_INSERT_CALL = insert(MinCall)
_INSERT_EVENT = insert(MinEvent)
_MOVE = update(MinSession).where(MinSession.id == bindparam("k_id")).values(last_seq=bindparam("v"))


_GET_ROW = select(MinSession.last_seq).where(MinSession.id == bindparam("k_id")).with_for_update()


async def _core_step(sid: str) -> None:
    """The same transaction on an ``AsyncConnection`` (SQLAlchemy Core, no ORM session)."""
    async with engine.begin() as connection:
        last = (await connection.execute(_GET_ROW, {"k_id": sid})).scalar_one_or_none()
        if last is None:
            await connection.execute(insert(MinSession), {"id": sid, "last_seq": 0})
            last = 0
        seq = last + 2
        await connection.execute(
            _INSERT_MESSAGES,
            [
                {"session_id": sid, "seq": seq, "role": "assistant", "content": _CALL},
                {"session_id": sid, "seq": seq + 1, "role": "tool", "content": _RESULT},
            ],
        )
        await connection.execute(_INSERT_CALL, {"session_id": sid, "seq": seq, "usage": _USAGE})
        await connection.execute(_INSERT_EVENT, {"session_id": sid, "seq": seq, "payload": _EVENT})
        await connection.execute(_MOVE, {"k_id": sid, "v": seq + 1})


async def _step(sid: str, deferred: bool) -> None:
    async with unit_of_work(factory) as db:
        if deferred:
            await defer(db)
        row = (
            await db.execute(select(MinSession).where(MinSession.id == sid).with_for_update())
        ).scalar_one_or_none()
        if row is None:
            row = MinSession(id=sid, last_seq=0)
            db.add(row)
            await db.flush()
        seq = row.last_seq + 2
        if deferred:  # the service's way: the writes go to the raw driver at the commit
            await write(
                db,
                _INSERT_MESSAGES,
                [
                    {"session_id": sid, "seq": seq, "role": "assistant", "content": _CALL},
                    {"session_id": sid, "seq": seq + 1, "role": "tool", "content": _RESULT},
                ],
            )
            await write(db, _INSERT_CALL, {"session_id": sid, "seq": seq, "usage": _USAGE})
            await write(db, _INSERT_EVENT, {"session_id": sid, "seq": seq, "payload": _EVENT})
            await write(db, _MOVE, {"k_id": sid, "v": seq + 1})
            return
        await db.execute(
            insert(MinMessage),
            [
                {"session_id": sid, "seq": seq, "role": "assistant", "content": _CALL},
                {"session_id": sid, "seq": seq + 1, "role": "tool", "content": _RESULT},
            ],
        )
        await db.execute(insert(MinCall), {"session_id": sid, "seq": seq, "usage": _USAGE})
        await db.execute(insert(MinEvent), {"session_id": sid, "seq": seq, "payload": _EVENT})
        await db.execute(update(MinSession).where(MinSession.id == sid).values(last_seq=seq + 1))


@app.post("/v1/sessions/{sid}/turns")
async def turn(sid: str, body: TurnBody, request: Request) -> dict[str, Any]:
    messages = int(request.query_params.get("messages", "100"))
    db = request.query_params.get("db", "session")
    data = _bodies.get(messages)
    if data is None:
        data = _bodies[messages] = conversation_body(messages)
    http = _http[0]
    for _ in range(CALLS):
        async with http.post(_PROVIDER, data=data, headers=_HEADERS) as response:
            async for _chunk in response.content.iter_any():
                pass
        if db == "core":
            await _core_step(sid)
        elif db == "raw":
            await _raw_step(sid)
        elif db != "none":
            await _step(sid, deferred=db == "deferred")
    return {
        "status": "completed",
        "model_calls": CALLS,
        "client_request_id": body.client_request_id,
    }
