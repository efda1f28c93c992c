"""Compaction metrics (the three declared in ``app.api.observability.Metrics``), behind a
Protocol so the service does not import the API layer."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from app.storage.models import Compaction

__all__ = ["CompactionMetrics", "MetricsRecorder", "new_compaction_id"]


def new_compaction_id() -> str:
    return f"cmp-{uuid.uuid4().hex}"


class _Labelled(Protocol):
    def labels(self, *values: Any, **named: Any) -> Any: ...


class CompactionMetrics(Protocol):
    @property
    def compactions(self) -> _Labelled: ...

    @property
    def compaction_tokens_reclaimed(self) -> _Labelled: ...

    @property
    def compaction_phase(self) -> _Labelled: ...


class MetricsRecorder:
    """Counts compactions by kind and result, tokens reclaimed, and phase timings."""

    def __init__(self, metrics: CompactionMetrics | None) -> None:
        self._metrics = metrics

    def count(self, kind: str, result: str) -> None:
        if self._metrics is not None:
            self._metrics.compactions.labels(kind, result).inc()

    def completed(self, row: Compaction) -> None:
        self.count(row.kind, "completed")
        if self._metrics is None:
            return
        before, after = row.conversation_tokens_before, row.conversation_tokens_after
        if before is not None and after is not None:
            self._metrics.compaction_tokens_reclaimed.labels(row.kind).inc(max(before - after, 0))
        phases: Sequence[tuple[str, int | None]] = (
            ("prepare", row.prepare_ms),
            ("summary", row.summary_ms),
            ("persistence", row.persistence_ms),
            ("install", row.install_ms),
        )
        for phase, value in phases:
            if value is not None:
                self._metrics.compaction_phase.labels(phase).observe(value / 1000)
