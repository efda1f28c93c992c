"""The service as ``uvicorn bench.floor_app:app`` serves it, plus what the floor benchmarks read
from inside the same process (``bench/floors_http.py``, ``bench/floors_turn.py``,
``bench/floors_cliff.py``):

- ``POST /bench/raw-echo``: the raw-bytes floor of ``POST /v1/prepare``: the body read and sent
  back as it came, no parsing, through the same uvicorn process (the echo of ``bench/echo_app.py``
  validates and re-serializes with pydantic: too kind a comparator);
- ``GET /bench/cpu``: this process's CPU time (all threads: aiosqlite runs its queries in a
  thread of its own), its resident memory (``/proc/self/statm``) and the database statements the
  server ran so far, counted as the server runs them: BEGIN and COMMIT/ROLLBACK each one, each row
  of an ``executemany`` or a multi-row INSERT one, and each deferred write
  (``app.storage.deferred``, sent to the driver directly) one per row.

Everything else goes to ``app.main.create_app()`` unchanged.
"""

from __future__ import annotations

import cProfile
import json
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI
from sqlalchemy import event

from app.main import create_app
from app.storage import deferred

__all__ = ["FloorApp"]  # and ``app``, built on first access (below)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_PAGE = os.sysconf("SC_PAGE_SIZE")
_deferred_rows = [0]  # rows sent by deferred writes, this process (patched in once)


def _rows(context: Any, parameters: Any, executemany: bool) -> int:
    compiled = getattr(context, "compiled_parameters", None)
    if compiled:  # executemany and insertmanyvalues batches: one per row
        return len(compiled)
    return len(parameters) if executemany and parameters else 1


def _count_deferred() -> None:
    if getattr(deferred, "_bench_counted", False):
        return
    for name in ("_flush_sqlite", "_flush_psycopg"):
        setattr(deferred, name, _counted(getattr(deferred, name)))
    deferred._bench_counted = True  # type: ignore[attr-defined]


# ``BENCH_SQL_LOG``: a file to list each statement in (its rows, its SQL's first words).
_LOG = os.environ.get("BENCH_SQL_LOG")
# ``BENCH_PROFILE``: a file ``POST /bench/profile`` writes cProfile's figures to (on the second).
_PROFILE = os.environ.get("BENCH_PROFILE")


def _log(rows: int, sql: str) -> None:
    if _LOG:
        with open(_LOG, "a") as out:
            out.write(f"{rows:>4} {' '.join(str(sql).split())[:110]}\n")


def _counted(flush: Any) -> Any:
    def counted(connection: Any, items: list[Any]) -> Any:
        _deferred_rows[0] += sum(len(i.params) if i.many else 1 for i in items)
        for i in items:
            _log(len(i.params) if i.many else 1, "(deferred) " + i.compiled.sql)
        return flush(connection, items)

    return counted


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


async def _reply(send: Send, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class FloorApp:
    """``inner`` (the service) with the two ``/bench/`` routes in front."""

    def __init__(self, inner: FastAPI) -> None:
        self.inner = inner
        self._statements = 0
        self._transactions = 0
        self._installed = False
        self._profiler: cProfile.Profile | None = None

    def _install_counter(self) -> None:
        """Listeners on the service's engine, installed on the first ``/bench/cpu`` (the
        engine is built by then)."""
        if self._installed:
            return
        self._installed = True
        engine = self.inner.state.container.engine.sync_engine
        _count_deferred()

        def statement(_c: Any, _cur: Any, _sql: Any, params: Any, ctx: Any, many: bool) -> None:
            self._statements += _rows(ctx, params, many)
            _log(_rows(ctx, params, many), _sql)

        def boundary(*_: Any) -> None:  # COMMIT, ROLLBACK: a statement each
            self._statements += 1
            _log(1, "COMMIT/ROLLBACK")

        def begin(*_: Any) -> None:
            self._statements += 1
            _log(1, "BEGIN")
            self._transactions += 1

        event.listen(engine, "before_cursor_execute", statement)
        event.listen(engine, "begin", begin)
        event.listen(engine, "commit", boundary)
        event.listen(engine, "rollback", boundary)

    def figures(self) -> dict[str, float]:
        self._install_counter()
        return {
            "cpu": time.process_time(),
            "rss": _rss(),
            "statements": self._statements + _deferred_rows[0],
            "transactions": self._transactions,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/bench/raw-echo":
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            await _reply(send, b"".join(chunks))
        elif path == "/bench/cpu":
            await _reply(send, json.dumps(self.figures()).encode())
        elif path == "/bench/profile" and _PROFILE:
            # Started, or stopped and written to ``BENCH_PROFILE`` (``bench/profile_turn.py``).
            if self._profiler is None:
                self._profiler = cProfile.Profile(time.thread_time)
                self._profiler.enable()
            else:
                self._profiler.disable()
                self._profiler.dump_stats(_PROFILE)
                self._profiler = None
            await _reply(send, b"{}")
        else:
            await self.inner(scope, receive, send)


def __getattr__(name: str) -> Any:
    """``app``: the service built from the process's settings, on first access (uvicorn's)."""
    if name != "app":
        raise AttributeError(name)
    built = FloorApp(create_app())
    globals()["app"] = built
    return built
