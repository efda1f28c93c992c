"""Compactions: one line and the compaction metrics per compaction, and a ``compaction`` span
around it (the summary model call and the checkpoint's statements are its children).

The compaction service hands each compaction to ``CompactionObserver.observe`` as the awaitable
that runs it and returns the stored row; a failure is the ``ServiceError`` it raises (its
``code`` is the outcome). What is known only halfway — the conversation tokens before, once the
source is read — is noted with ``note_source`` by the code that reads it.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Awaitable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from app.core.compaction.shrink import CompactionNotSmaller
from app.core.errors import ServiceError
from app.observability.context import bound_work, current_work
from app.observability.logs import event_line
from app.observability.metrics import Metrics

__all__ = ["CompactionObserver", "CompactionRow", "note_source"]

log = logging.getLogger("ctxsvc.compactions")


class CompactionRow(Protocol):
    """What is read of a stored checkpoint (``app.storage.models.Compaction``)."""

    @property
    def compaction_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def attempts(self) -> int | None: ...
    @property
    def conversation_tokens_before(self) -> int | None: ...
    @property
    def conversation_tokens_after(self) -> int | None: ...
    @property
    def prepare_ms(self) -> int | None: ...
    @property
    def summary_ms(self) -> int | None: ...
    @property
    def persistence_ms(self) -> int | None: ...
    @property
    def install_ms(self) -> int | None: ...


R = TypeVar("R", bound=CompactionRow)


@dataclass(slots=True)
class _Progress:
    tokens_before: int | None = None


_progress: contextvars.ContextVar[_Progress | None] = contextvars.ContextVar(
    "compaction_progress", default=None
)


def note_source(conversation_tokens_before: int) -> None:
    """The compaction being observed in this task read its source: the Conversation's tokens."""
    progress = _progress.get()
    if progress is not None:
        progress.tokens_before = conversation_tokens_before


class CompactionObserver:
    def __init__(self, metrics: Metrics, tracer: trace.Tracer | None) -> None:
        self._metrics = metrics
        self._tracer = tracer

    async def observe(
        self,
        work: Awaitable[R],
        *,
        kind: str,
        session_id: str,
        turn_id: str | None = None,
    ) -> R:
        """Await ``work`` (one compaction of ``kind``) and record how it went."""
        started = time.perf_counter()
        progress = _Progress()
        token = _progress.set(progress)
        # An in-turn compaction already runs in its turn's bound ids; a manual one gets its own.
        turn_id = turn_id if turn_id is not None else current_work().turn_id
        try:
            with bound_work(session_id, turn_id), self._span(kind, session_id, turn_id) as span:
                try:
                    row = await work
                except ServiceError as exc:
                    self._failed(kind, exc, progress, started, span)
                    raise
                self._completed(row, started, span)
                return row
        finally:
            _progress.reset(token)

    def _span(
        self, kind: str, session_id: str, turn_id: str | None
    ) -> AbstractContextManager[trace.Span | None]:
        if self._tracer is None:
            return nullcontext()
        attributes: dict[str, Any] = {
            "ctxsvc.session_id": session_id,
            "ctxsvc.compaction.kind": kind,
        }
        if turn_id is not None:
            attributes["ctxsvc.turn_id"] = turn_id
        return self._tracer.start_as_current_span(
            f"compaction {kind}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )

    def _completed(self, row: CompactionRow, started: float, span: trace.Span | None) -> None:
        seconds = time.perf_counter() - started
        m = self._metrics
        m.compactions.labels(row.kind, "completed").inc()
        m.compaction_duration.labels(row.kind, "completed").observe(seconds)
        before, after = row.conversation_tokens_before, row.conversation_tokens_after
        if before is not None and after is not None:
            m.compaction_saved_tokens.labels(row.kind).inc(max(before - after, 0))
        for phase, ms in (
            ("prepare", row.prepare_ms),
            ("summary", row.summary_ms),
            ("persistence", row.persistence_ms),
            ("install", row.install_ms),
        ):
            if ms is not None:
                m.compaction_phase.labels(phase).observe(ms / 1000)
        fields = {
            "compaction_id": row.compaction_id,
            "kind": row.kind,
            "trigger_turn_id": current_work().turn_id,
            "attempts": row.attempts,
            "conversation_tokens_before": before,
            "conversation_tokens_after": after,
            "duration_ms": round(seconds * 1000, 2),
            "outcome": "completed",
            "code": None,
        }
        if span is not None:
            span.set_attributes({f"ctxsvc.compaction.{k}": v for k, v in fields.items() if v})
        if log.isEnabledFor(logging.INFO):
            event_line(log, logging.INFO, "compaction", "compaction", fields)

    def _failed(
        self,
        kind: str,
        exc: ServiceError,
        progress: _Progress,
        started: float,
        span: trace.Span | None,
    ) -> None:
        seconds = time.perf_counter() - started
        code = exc.code
        self._metrics.compactions.labels(kind, code).inc()
        self._metrics.compaction_duration.labels(kind, code).observe(seconds)
        attempts = exc.extra.get("attempts")
        # A summary that would not shrink the conversation is the rule working, not a failure
        # (spec §9): the turn goes on uncompacted. Logged at INFO with both figures.
        refused = exc if isinstance(exc, CompactionNotSmaller) else None
        fields = {
            "compaction_id": None,
            "kind": kind,
            "trigger_turn_id": current_work().turn_id,
            "attempts": attempts if isinstance(attempts, int) else None,
            "conversation_tokens_before": refused.before if refused else progress.tokens_before,
            "conversation_tokens_after": refused.after if refused else None,
            "duration_ms": round(seconds * 1000, 2),
            "outcome": "not_installed" if refused else "failed",
            "code": code,
        }
        if span is not None:
            span.set_attributes({f"ctxsvc.compaction.{k}": v for k, v in fields.items() if v})
            if not refused:
                span.set_attribute("error.type", code)
                span.set_status(Status(StatusCode.ERROR, code))
        level, message = (
            (logging.INFO, "compaction not installed")
            if refused
            else (logging.WARNING, "compaction failed")
        )
        if log.isEnabledFor(level):
            event_line(log, level, "compaction", message, fields)
