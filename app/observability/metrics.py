"""The Prometheus metrics: their definitions (one registry per app) and the ``/metrics`` text.

Names follow the Prometheus conventions: a ``ctxsvc_`` prefix, the base unit in the name
(``_seconds``, ``_tokens``), ``_total`` on counters (added by the client library). Labels are
bounded: route templates (never raw paths), model ids, provider kinds, statuses and problem
codes, never session or turn ids.

Several worker processes (``ctxsvc serve --workers N``) use prometheus-client's multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR``, see ``exposition``): any worker's ``/metrics`` answers for
all of them.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    values,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from sqlalchemy.pool import Pool, QueuePool

__all__ = ["GcTally", "Metrics", "multiprocess_mode", "pool_figures"]

# Model calls take from tens of milliseconds (a cached short answer) to minutes (long outputs).
_MODEL_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600)
_FIRST_BYTE_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 60)
# A turn spans model calls, tools and the caller's own tool time.
_TURN_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# The prepare pipeline and a World State sample: sub-millisecond to seconds.
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)
_COMPACTION_BUCKETS = (0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# reported / estimated input tokens: 1.0 is a perfect estimate.
_RATIO_BUCKETS = (0.5, 0.75, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.25, 1.5, 2.0, 3.0)


def multiprocess_mode() -> bool:
    """Whether prometheus-client writes values to ``PROMETHEUS_MULTIPROC_DIR`` (decided when it
    was first imported, from that variable)."""
    return values.ValueClass is not values.MutexValue


class Metrics:
    """Every metric of one app, in its own registry, so several apps in one process (tests, a
    benchmark) never collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # -- HTTP ----------------------------------------------------------------------------
        self.requests = Counter(
            "ctxsvc_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "ctxsvc_http_request_duration_seconds",
            "HTTP request latency by method and route template.",
            ["method", "route"],
            registry=r,
        )
        # -- turns ---------------------------------------------------------------------------
        self.turns_started = Counter(
            "ctxsvc_turns_started", "Turns accepted (new turns, not replays).", registry=r
        )
        self.turns_finished = Counter(
            "ctxsvc_turns_finished",
            "Turns that ended, by status and outcome code ('none' without one).",
            ["status", "code"],
            registry=r,
        )
        self.turn_duration = Histogram(
            "ctxsvc_turn_duration_seconds",
            "Turns from acceptance to their end (tool time of the caller included), by status.",
            ["status"],
            buckets=_TURN_BUCKETS,
            registry=r,
        )
        # -- model calls ---------------------------------------------------------------------
        call_labels = ["model", "provider_kind", "purpose"]
        self.model_call_duration = Histogram(
            "ctxsvc_model_call_duration_seconds",
            "Model calls (retries included), by model, provider kind and purpose "
            "(turn/summary/proxy).",
            call_labels,
            buckets=_MODEL_CALL_BUCKETS,
            registry=r,
        )
        self.model_call_first_byte = Histogram(
            "ctxsvc_model_call_first_byte_seconds",
            "From sending a model call's answering attempt to its first body bytes.",
            call_labels,
            buckets=_FIRST_BYTE_BUCKETS,
            registry=r,
        )
        self.model_call_errors = Counter(
            "ctxsvc_model_call_errors",
            "Model calls that failed, by model, provider kind and error class.",
            ["model", "provider_kind", "error_class"],
            registry=r,
        )
        self.model_call_retries = Counter(
            "ctxsvc_model_call_retries",
            "Failed attempts that the provider adapter retried, by error class.",
            ["model", "provider_kind", "error_class"],
            registry=r,
        )
        self.input_tokens = Counter(
            "ctxsvc_model_input_tokens",
            "Input tokens the providers reported (cached included), by model.",
            ["model"],
            registry=r,
        )
        self.output_tokens = Counter(
            "ctxsvc_model_output_tokens",
            "Output tokens the providers reported (reasoning included), by model.",
            ["model"],
            registry=r,
        )
        self.cached_tokens = Counter(
            "ctxsvc_model_cached_tokens",
            "Input tokens the providers reported as read from their prompt cache, by model.",
            ["model"],
            registry=r,
        )
        self.cache_creation_tokens = Counter(
            "ctxsvc_model_cache_creation_tokens",
            "Input tokens the providers reported as written to their prompt cache, by model.",
            ["model"],
            registry=r,
        )
        self.reasoning_tokens = Counter(
            "ctxsvc_model_reasoning_tokens",
            "Output tokens the providers reported as reasoning, by model.",
            ["model"],
            registry=r,
        )
        self.calibration_ratio = Histogram(
            "ctxsvc_calibration_ratio",
            "Provider-reported input tokens over the service's estimate, per model call, by model"
            " and counter (sum/count is the mean ratio).",
            ["model", "counter"],
            buckets=_RATIO_BUCKETS,
            registry=r,
        )
        # -- prepare, World State, compaction -----------------------------------------------
        self.prepare = Histogram(
            "ctxsvc_prepare_duration_seconds",
            "Time in the prepare pipeline, by caller (stateless, session, inspection, tokens,"
            " turn).",
            ["kind"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.world_state = Histogram(
            "ctxsvc_world_state_duration_seconds",
            "World State sampling: capture (reading the inputs) and write (render, diff, store),"
            " by source (directory, provided, none).",
            ["phase", "source"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.compactions = Counter(
            "ctxsvc_compactions",
            "Compactions by kind and outcome ('completed' or the problem code).",
            ["kind", "outcome"],
            registry=r,
        )
        self.compaction_saved_tokens = Counter(
            "ctxsvc_compaction_saved_tokens",
            "Conversation tokens saved by completed compactions (before minus after), by kind.",
            ["kind"],
            registry=r,
        )
        self.compaction_duration = Histogram(
            "ctxsvc_compaction_duration_seconds",
            "Compactions from start to installed (or failed), by kind and outcome.",
            ["kind", "outcome"],
            buckets=_COMPACTION_BUCKETS,
            registry=r,
        )
        self.compaction_phase = Histogram(
            "ctxsvc_compaction_phase_duration_seconds",
            "Phases of completed compactions (prepare, summary, persistence, install).",
            ["phase"],
            buckets=_COMPACTION_BUCKETS,
            registry=r,
        )
        # -- the process ---------------------------------------------------------------------
        self.pool = Gauge(
            "ctxsvc_db_pool_connections",
            "Database pool connections by state.",
            ["state"],
            registry=r,
            # Summed over live workers; a dead worker's figures go (``exposition``).
            multiprocess_mode="livesum",
        )
        self.pool_probe: Callable[[], dict[str, int]] | None = None
        self._gc_callback: Callable[[str, dict[str, Any]], None] | None = None
        self._gc_tally: GcTally | None = None
        if multiprocess_mode():
            self._count_gc_collections()
        else:
            # The standard collectors, in this app's registry (the default one is not used).
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)

    def refresh_pool(self) -> None:
        if self.pool_probe is not None:
            for state, value in self.pool_probe().items():
                self.pool.labels(state).set(value)

    def _count_gc_collections(self) -> None:
        """In multiprocess mode the GC collector cannot read other workers' statistics: each
        worker counts its own collections into shared counters of the same names instead.

        The collector's callback runs wherever an allocation triggers a collection, also inside
        prometheus-client's own metric writes, which hold a non-reentrant lock: a callback that
        wrote a metric would deadlock the worker (``ctxsvc serve --workers 2`` hung at start on
        PostgreSQL). So the callback only adds to plain integers (``GcTally``) and ordinary code
        (``publish_gc``: each request's end and every scrape) moves them into the counters."""
        self._gc_collections = Counter(
            "python_gc_collections",
            "Number of times this generation was collected.",
            ["generation"],
            registry=self.registry,
        )
        self._gc_collected = Counter(
            "python_gc_objects_collected",
            "Objects collected during gc.",
            ["generation"],
            registry=self.registry,
        )
        self._gc_uncollectable = Counter(
            "python_gc_objects_uncollectable",
            "Uncollectable objects found during GC.",
            ["generation"],
            registry=self.registry,
        )
        tally = GcTally()
        self._gc_tally = tally
        self._gc_callback = tally.on_gc
        gc.callbacks.append(tally.on_gc)

    def publish_gc(self) -> None:
        """Add the collections counted since the last call to the shared GC counters (never
        call it from a GC callback or a signal handler)."""
        if self._gc_tally is None:
            return
        for generation, (collections, collected, uncollectable) in self._gc_tally.take():
            label = str(generation)
            if collections:
                self._gc_collections.labels(label).inc(collections)
            if collected:
                self._gc_collected.labels(label).inc(collected)
            if uncollectable:
                self._gc_uncollectable.labels(label).inc(uncollectable)

    def close(self) -> None:
        if self._gc_callback is not None and self._gc_callback in gc.callbacks:
            gc.callbacks.remove(self._gc_callback)
        self._gc_callback = None


class GcTally:
    """Collections per generation, counted by a GC callback into plain integers only: no lock,
    no allocation that could start another collection's bookkeeping, nothing that can block.

    ``take`` runs in ordinary code and returns what was counted since its last call. A
    collection landing while ``take`` runs adds to the totals after they were read; it is
    reported by the next ``take`` (totals only grow; ``take`` remembers what it reported)."""

    GENERATIONS = 3

    def __init__(self) -> None:
        self.collections = [0] * self.GENERATIONS
        self.collected = [0] * self.GENERATIONS
        self.uncollectable = [0] * self.GENERATIONS
        self._reported = [(0, 0, 0)] * self.GENERATIONS

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop":
            return
        generation = info["generation"]
        self.collections[generation] += 1
        self.collected[generation] += info["collected"]
        self.uncollectable[generation] += info["uncollectable"]

    def take(self) -> list[tuple[int, tuple[int, int, int]]]:
        """``(generation, (collections, collected, uncollectable))`` counted since last time."""
        deltas: list[tuple[int, tuple[int, int, int]]] = []
        for generation in range(self.GENERATIONS):
            now = (
                self.collections[generation],
                self.collected[generation],
                self.uncollectable[generation],
            )
            before = self._reported[generation]
            self._reported[generation] = now
            deltas.append(
                (generation, (now[0] - before[0], now[1] - before[1], now[2] - before[2]))
            )
        return deltas


def pool_figures(pool: Pool) -> dict[str, int]:
    """Connections of a queue pool by state (PostgreSQL, and SQLite files on SQLAlchemy 2).

    Pools that keep no connections (``NullPool``, ``StaticPool``) have nothing to report.
    """
    if not isinstance(pool, QueuePool):
        return {}
    return {
        "size": pool.size(),
        "checked_out": pool.checkedout(),
        "idle": pool.checkedin(),
        # Negative while the pool is below its size (SQLAlchemy counts from -size); 0 then.
        "overflow": max(pool.overflow(), 0),
    }
