"""Turns: the accepted and finished lines, the turn metrics, and one ``turn`` span per runner leg.

A turn runs in legs: a runner (an asyncio task) works until the turn ends or waits for the
caller's tool results, and the replica that receives the last result starts the next leg. Every
leg is a ``turn`` span in the same trace — the one of the request that started the turn, whose
``traceparent`` is stored on the turn row — and a resumed leg links to the request that
resumed it. Every line a leg writes carries the session and turn ids.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Link

from app.observability.context import bound_work
from app.observability.logs import event_line
from app.observability.metrics import Metrics
from app.observability.tracing import context_of

__all__ = ["TurnLeg", "TurnObserver", "TurnRow"]

log = logging.getLogger("ctxsvc.turns")


class TurnRow(Protocol):
    """What is read of a stored turn (``app.storage.models.Turn``)."""

    @property
    def session_id(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def outcome(self) -> dict[str, Any] | None: ...
    @property
    def model_call_index(self) -> int: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_creation_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def finished_at(self) -> datetime | None: ...


class TurnLeg(Protocol):
    """A runner, as its leg's observer sees it (``app.services.turns.runner.TurnRunner``)."""

    @property
    def session_id(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def phase(self) -> str | None: ...
    @property
    def final(self) -> TurnRow | None: ...


def _code(turn: TurnRow) -> str | None:
    code = (turn.outcome or {}).get("code")
    return code if isinstance(code, str) else None


def _duration_seconds(turn: TurnRow) -> float | None:
    if turn.finished_at is None:
        return None
    try:
        return max((turn.finished_at - turn.created_at).total_seconds(), 0.0)
    except TypeError:  # one aware, one naive: not comparable
        return None


class TurnObserver:
    def __init__(self, metrics: Metrics, tracer: trace.Tracer | None) -> None:
        self._metrics = metrics
        self._tracer = tracer

    def accepted(self, turn: TurnRow, *, model_id: str | None, input_items: int) -> None:
        self._metrics.turns_started.inc()
        if log.isEnabledFor(logging.INFO):
            fields = {
                "session_id": turn.session_id,
                "turn_id": turn.turn_id,
                "status": turn.status,
                "phase": turn.phase,
                "model_id": model_id,
                "input_items": input_items,
            }
            event_line(log, logging.INFO, "turn_accepted", "turn accepted", fields)

    def finished(self, turn: TurnRow) -> None:
        """A turn became terminal (called once, by whoever made it so, after the commit)."""
        code = _code(turn)
        seconds = _duration_seconds(turn)
        m = self._metrics
        m.turns_finished.labels(turn.status, code or "none").inc()
        if seconds is not None:
            m.turn_duration.labels(turn.status).observe(seconds)
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(_finished_attributes(turn, code))
        level = logging.INFO if turn.status in ("completed", "cancelled") else logging.WARNING
        if log.isEnabledFor(level):
            fields = {
                "session_id": turn.session_id,
                "turn_id": turn.turn_id,
                "status": turn.status,
                "code": code,
                "model_calls": turn.model_call_index,
                "input_tokens": turn.input_tokens,
                "output_tokens": turn.output_tokens,
                "cached_tokens": turn.cached_tokens,
                "cache_creation_tokens": turn.cache_creation_tokens,
                "reasoning_tokens": turn.reasoning_tokens,
                "duration_ms": None if seconds is None else round(seconds * 1000, 2),
            }
            event_line(log, level, "turn_finished", "turn finished", fields)

    async def leg(self, work: Awaitable[None], leg: TurnLeg, *, resumed_from: str | None) -> None:
        """Run ``work`` (the leg's supervisor) as the leg of ``leg``'s turn. ``resumed_from`` is
        the turn's stored ``traceparent`` when this leg continues a waiting turn (``""`` if the
        turn has none); ``None`` for a new turn's first leg (its request is the parent)."""
        with bound_work(leg.session_id, leg.turn_id), self._leg_span(leg, resumed_from):
            await work
            if leg.final is not None:
                self.finished(leg.final)

    @contextmanager
    def _leg_span(self, leg: TurnLeg, resumed_from: str | None) -> Iterator[None]:
        if self._tracer is None:
            yield
            return
        links: list[Link] = []
        parent = None
        if resumed_from is not None:
            # The request that delivered the last tool result resumed this leg.
            resuming = trace.get_current_span().get_span_context()
            if resuming.is_valid:
                links.append(Link(resuming, {"ctxsvc.link": "resumed_by"}))
            parent = context_of(resumed_from)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "ctxsvc.session_id": leg.session_id,
            "ctxsvc.turn_id": leg.turn_id,
            "ctxsvc.turn.resumed": resumed_from is not None,
        }
        with self._tracer.start_as_current_span(
            "turn", context=parent, links=links, attributes=attributes
        ) as span:
            try:
                yield
            finally:
                phase = leg.final.phase if leg.final is not None else leg.phase
                if phase is not None:
                    span.set_attribute("ctxsvc.turn.phase", phase)


def _finished_attributes(turn: TurnRow, code: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "ctxsvc.turn.status": turn.status,
        "ctxsvc.turn.model_calls": turn.model_call_index,
        "gen_ai.usage.input_tokens": turn.input_tokens,
        "gen_ai.usage.output_tokens": turn.output_tokens,
    }
    if code is not None:
        attributes["ctxsvc.turn.outcome_code"] = code
    return attributes
