"""``Observability``: the one handle the services are given to observe their work (logs, metrics,
traces), built once per app by the composition root.

Each hook is a line or two at its call site: ``prepare(kind)`` and ``world_state(phase,
source)`` time a block into a histogram (and a span), ``model_client`` wraps a provider client,
``turns`` and ``compactions`` observe those use cases. With traces off, ``tracer`` is ``None``
and every hook does only its metric update (and its log line at info, when that level is on).
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol, TypeVar

import aiohttp
import anyio
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.metrics import Histogram
from sqlalchemy.ext.asyncio import AsyncEngine

from app.observability import tracing
from app.observability.compactions import CompactionObserver
from app.observability.metrics import Metrics
from app.observability.model_calls import CallTarget, ObservedModelClient
from app.observability.provider_requests import provider_request_tracing
from app.observability.turns import TurnObserver
from app.providers.base import ModelClient

__all__ = ["BudgetFigures", "Observability", "Timed"]

T = TypeVar("T")


class BreakFigures(Protocol):
    """A budget's ``prefix_break`` (``app.core.pipeline.prepared_call.PrefixBreak``)."""

    @property
    def index(self) -> int: ...
    @property
    def reason(self) -> str: ...


class BudgetFigures(Protocol):
    """What a prepare span shows of the budget (``app.core.pipeline.prepared_call.Budget``)."""

    @property
    def estimated_input_tokens(self) -> int: ...
    @property
    def effective_input_tokens(self) -> int: ...
    @property
    def context_window_tokens(self) -> int: ...
    @property
    def auto_compact_token_limit(self) -> int: ...
    @property
    def reaches_auto_compact_limit(self) -> bool: ...
    @property
    def conversation_tokens(self) -> int: ...
    @property
    def counter(self) -> str: ...
    @property
    def stable_prefix_tokens(self) -> int: ...
    @property
    def prefix_break(self) -> BreakFigures | None: ...


class Timed:
    """A block timed into one histogram child, and a span around it when traces are on."""

    __slots__ = ("_histogram", "_span_scope", "_started", "span")

    def __init__(
        self,
        histogram: Histogram,
        span_scope: AbstractContextManager[trace.Span] | None,
    ) -> None:
        self._histogram = histogram
        self._span_scope = span_scope
        self._started = 0.0
        self.span: trace.Span | None = None

    def __enter__(self) -> Timed:
        if self._span_scope is not None:
            self.span = self._span_scope.__enter__()
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._histogram.observe(time.perf_counter() - self._started)
        if self._span_scope is not None:
            self._span_scope.__exit__(exc_type, exc, tb)

    def budget(self, budget: BudgetFigures) -> None:
        """Show the prepared request's budget on the span (nothing when traces are off)."""
        if self.span is not None:
            self.span.set_attributes(
                {
                    "ctxsvc.budget.estimated_input_tokens": budget.estimated_input_tokens,
                    "ctxsvc.budget.effective_input_tokens": budget.effective_input_tokens,
                    "ctxsvc.budget.context_window_tokens": budget.context_window_tokens,
                    "ctxsvc.budget.auto_compact_token_limit": budget.auto_compact_token_limit,
                    "ctxsvc.budget.reaches_auto_compact_limit": budget.reaches_auto_compact_limit,
                    "ctxsvc.budget.conversation_tokens": budget.conversation_tokens,
                    "ctxsvc.budget.counter": budget.counter,
                    "ctxsvc.budget.stable_prefix_tokens": budget.stable_prefix_tokens,
                }
            )
            broken = budget.prefix_break
            if broken is not None:  # an attribute is never null: absent when nothing broke
                self.span.set_attributes(
                    {
                        "ctxsvc.budget.prefix_break.index": broken.index,
                        "ctxsvc.budget.prefix_break.reason": broken.reason,
                    }
                )


class Observability:
    def __init__(
        self, metrics: Metrics | None = None, tracer_provider: TracerProvider | None = None
    ) -> None:
        self.metrics = metrics or Metrics()
        self.tracer_provider = tracer_provider
        self.tracer: trace.Tracer | None = (
            None
            if tracer_provider is None
            else tracer_provider.get_tracer(tracing.INSTRUMENTATION_NAME)
        )
        self.turns = TurnObserver(self.metrics, self.tracer)
        self.compactions = CompactionObserver(self.metrics, self.tracer)
        # Label children bound once: every model call uses a few (a lookup takes a lock).
        self._prepare = {
            kind: self.metrics.prepare.labels(kind)
            for kind in ("stateless", "session", "inspection", "tokens", "turn")
        }
        self._world_state = {
            (phase, source): self.metrics.world_state.labels(phase, source)
            for phase in ("capture", "write")
            for source in ("directory", "provided", "none")
        }
        self._ratios: dict[tuple[str, str], Histogram] = {}

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, version: str) -> Observability:
        """Traces as the ``OTEL_*`` variables in ``env`` ask (off when they do not)."""
        return cls(tracer_provider=tracing.tracer_provider_from_env(env, version))

    # ----- wiring (the composition root) -------------------------------------------------------

    def instrument_app(self, app: FastAPI) -> None:
        if self.tracer_provider is not None:
            tracing.instrument_app(app, self.tracer_provider, os.environ)

    def instrument_engine(self, engine: AsyncEngine) -> None:
        if self.tracer_provider is not None:
            tracing.instrument_engine(engine, self.tracer_provider)

    def provider_trace_configs(self) -> list[aiohttp.TraceConfig]:
        """The trace configs of the provider adapters' HTTP session (none with traces off)."""
        if self.tracer_provider is None:
            return []
        return [provider_request_tracing(self.tracer_provider, os.environ)]

    async def aclose(self) -> None:
        self.metrics.close()
        if self.tracer_provider is not None:
            # Flushes the batch of spans not exported yet (the exporter blocks: a thread).
            await anyio.to_thread.run_sync(self.tracer_provider.shutdown)

    # ----- hooks ---------------------------------------------------------------------------------

    def prepare(self, kind: str) -> Timed:
        """Time one prepare (``kind``: stateless, session, inspection, tokens, turn)."""
        return Timed(self._prepare[kind], self._span("prepare", {"ctxsvc.prepare.kind": kind}))

    def world_state(self, phase: str, source: str) -> Timed:
        """Time one World State ``phase`` (capture, write) of a ``source`` (directory, provided,
        none)."""
        span = self._span(
            f"world_state.{phase}",
            {"ctxsvc.world_state.phase": phase, "ctxsvc.world_state.source": source},
        )
        return Timed(self._world_state[phase, source], span)

    def model_client(self, inner: ModelClient, target: CallTarget) -> ModelClient:
        return ObservedModelClient(inner, target, self.metrics, self.tracer)

    def calibration_sample(
        self, model_id: str, counter: str, estimated: int, reported: int
    ) -> None:
        """One provider answer's reported input tokens next to the estimate it was sent with."""
        if estimated <= 0 or reported <= 0:
            return
        ratios = self._ratios.get((model_id, counter))
        if ratios is None:
            ratios = self._ratios[model_id, counter] = self.metrics.calibration_ratio.labels(
                model_id, counter
            )
        ratios.observe(reported / estimated)

    def traceparent(self) -> str | None:
        """The current span's W3C ``traceparent`` (``None`` with traces off): stored with a turn,
        so its later legs join the trace on whichever replica runs them."""
        if self.tracer is None:
            return None
        return tracing.traceparent_of(trace.get_current_span())

    async def untraced(self, work: Awaitable[T]) -> T:
        """Await ``work`` without spans from the instrumentations: periodic polling (a lease
        watch, the reaper, an event stream's re-reads) would otherwise add a database span
        every interval to the trace it runs in."""
        if self.tracer is None:
            return await work
        with suppress_instrumentation():
            return await work

    def _span(
        self, name: str, attributes: dict[str, Any]
    ) -> AbstractContextManager[trace.Span] | None:
        if self.tracer is None:
            return None
        return self.tracer.start_as_current_span(name, attributes=attributes)
