"""What ``bench/turns.py`` measures a turn with: the provider calls' spans (``TimedClient``), a
turn's path from them (``TurnPath``), the database statements and round trips of the app's
engine (``RoundTrips``), and the observability hooks of one model call timed alone
(``hooks_alone``)."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from sqlalchemy import event

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.core.pipeline.prepared_call import Budget
from app.observability import CallTarget, Observability
from app.providers.base import ModelClient, ModelResponse, StreamSink, Usage
from app.storage import deferred

__all__ = ["RoundTrips", "TimedClient", "TurnPath", "hooks_alone"]


class TimedClient:
    """Records when each provider call began and ended (``perf_counter``) in a shared list."""

    def __init__(self, inner: ModelClient, calls: list[tuple[float, float]]) -> None:
        self._inner = inner
        self._calls = calls
        # Passed on: the runner overlaps a step's commit with calls of clients that say when
        # a request is written (``app.services.turns.overlap``).
        self.signals_sent: bool = getattr(inner, "signals_sent", False)

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        started = time.perf_counter()
        try:
            return await self._inner.complete(
                request, sink=sink, caching=caching, conversation=conversation
            )
        finally:
            self._calls.append((started, time.perf_counter()))


@dataclass(frozen=True)
class TurnPath:
    """Where a turn's wall time went outside its provider calls, from the client's side."""

    start: float  # the request sent → its first provider call begins
    step: float  # a call ended → the next one begins (median over the turn's tool steps)
    finish: float  # the last call ended → the answer arrived

    @staticmethod
    def of(sent: float, answered: float, calls: list[tuple[float, float]]) -> TurnPath:
        gaps = [after[0] - before[1] for before, after in itertools.pairwise(calls)]
        return TurnPath(calls[0][0] - sent, statistics.median(gaps), answered - calls[-1][1])

    @staticmethod
    def median(paths: list[TurnPath]) -> TurnPath:
        return TurnPath(
            statistics.median(p.start for p in paths),
            statistics.median(p.step for p in paths),
            statistics.median(p.finish for p in paths),
        )


class _Answer:
    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        return ModelResponse(text="ok", usage=Usage(input_tokens=100, output_tokens=5))


async def hooks_alone(iterations: int = 20_000) -> float:
    """Seconds the observability hooks of one model call take with traces and info lines off:
    the prepare and World State timers, the model-call wrapper (against a client that answers
    at once) and the calibration sample, minus the same client called bare."""
    observability = Observability()
    target = CallTarget("bench", "openai_chat", "gpt-fake", "turn")
    answer = _Answer()
    observed = observability.model_client(answer, target)
    budget = Budget(0, 0, 0, 100, 10, 1000, 900, 800, False, 900, 800, False, "estimate")
    request: dict[str, Any] = {"messages": [], "tools": []}

    async def hooked() -> None:
        with observability.prepare("turn") as timed:
            timed.budget(budget)
        with observability.world_state("capture", "none"):
            pass
        with observability.world_state("write", "none"):
            pass
        await observed.complete(request)
        observability.calibration_sample("bench", "estimate", 100, 97)

    async def bare() -> None:
        await answer.complete(request)

    timings = []
    for body in (hooked, bare):
        started = time.perf_counter()
        for _ in range(iterations):
            await body()
        timings.append((time.perf_counter() - started) / iterations)
    return timings[0] - timings[1]


class RoundTrips:
    """Statements, transactions and database round trips of the app's engine. Statements are
    those SQLAlchemy runs plus the deferred writes (``app.storage.deferred``), which go to the
    driver directly. On PostgreSQL a round trip is a statement SQLAlchemy runs, a pipeline of
    deferred writes (one sync for all of them), and the BEGIN and COMMIT psycopg sends per
    transaction; SQLite runs in-process (no round trips: statements are what costs)."""

    def __init__(self, app: FastAPI) -> None:
        self.executed = 0  # by SQLAlchemy
        self.deferred = 0  # queued, then sent together
        self.flushes = 0
        self.transactions = 0
        engine = app.state.container.engine.sync_engine
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "begin", self._begin)
        for name in ("_flush_sqlite", "_flush_psycopg"):
            setattr(deferred, name, self._counted(getattr(deferred, name)))

    def _counted(self, flush: Any) -> Any:
        def counted(connection: Any, items: list[Any]) -> Any:
            self.deferred += len(items)
            self.flushes += 1
            return flush(connection, items)

        return counted

    def _statement(self, *_: object) -> None:
        self.executed += 1

    def _begin(self, *_: object) -> None:
        self.transactions += 1

    def snapshot(self) -> tuple[int, int, int, int]:
        return self.executed, self.deferred, self.flushes, self.transactions
