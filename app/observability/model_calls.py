"""Every model call, observed where clients are handed out (``ModelClients.for_model``): turn
calls and compaction summaries alike, whichever adapter runs them.

Per call: one log line (``event: model_call``), the latency and first-byte histograms, token
counters, an error counter by error class, a retry counter per retried attempt, and, with
traces on, a ``chat {model}`` client span carrying the GenAI semantic-convention attributes (the
provider's HTTP request is its child). The adapters report attempts and the first byte through
``app.providers.call_stats``. Nothing of the request or the answer is logged but counts: no
text, no tool input, no provider error message (it may quote the input).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.observability.context import current_work
from app.observability.logs import event_line
from app.observability.metrics import Metrics
from app.providers.base import ModelClient, ModelResponse, ProviderError, StreamSink
from app.providers.call_stats import CallStats, collecting, stop_collecting

__all__ = ["CallTarget", "ObservedModelClient", "gen_ai_provider_name"]

log = logging.getLogger("ctxsvc.model_calls")

# OpenTelemetry GenAI semantic conventions: gen_ai.provider.name's well-known values, and
# ctxsvc's own for the offline kinds.
_PROVIDER_NAMES = {
    "openai_chat": "openai",
    "anthropic_messages": "anthropic",
    "openai_responses": "openai",
    "local": "ctxsvc.local",
    "scripted": "ctxsvc.scripted",
}


def gen_ai_provider_name(kind: str) -> str:
    return _PROVIDER_NAMES.get(kind, kind)


@dataclass(frozen=True, slots=True)
class CallTarget:
    """What a model call is labelled with: the registered model, its provider kind, the model
    name sent to the provider, and why it is called (``turn`` or ``summary``)."""

    model_id: str
    provider_kind: str
    request_model: str
    purpose: str


class ObservedModelClient:
    """A ``ModelClient`` that observes ``inner``'s calls."""

    def __init__(
        self,
        inner: ModelClient,
        target: CallTarget,
        metrics: Metrics,
        tracer: trace.Tracer | None,
    ) -> None:
        self.inner = inner
        # Whether the wrapped client says when a request is written (``call_stats.note_sent``).
        self.signals_sent: bool = getattr(inner, "signals_sent", False)
        self._target = target
        self._metrics = metrics
        self._tracer = tracer
        labels = (target.model_id, target.provider_kind, target.purpose)
        # Bound once per client (a turn's calls share one): the hot path skips label lookups.
        self._duration = metrics.model_call_duration.labels(*labels)
        self._first_byte = metrics.model_call_first_byte.labels(*labels)
        model = target.model_id
        self._input = metrics.input_tokens.labels(model)
        self._output = metrics.output_tokens.labels(model)
        self._cached = metrics.cached_tokens.labels(model)
        self._cache_creation = metrics.cache_creation_tokens.labels(model)
        self._reasoning = metrics.reasoning_tokens.labels(model)

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        if self._tracer is None:
            return await self._observed(request, sink, caching, conversation, None)
        target = self._target
        with self._tracer.start_as_current_span(
            f"chat {target.request_model}",
            kind=SpanKind.CLIENT,
            attributes=_request_attributes(target, request),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            return await self._observed(request, sink, caching, conversation, span)

    async def _observed(
        self,
        request: dict[str, Any],
        sink: StreamSink | None,
        caching: CachePlan | None,
        conversation: Sequence[Item] | None,
        span: trace.Span | None,
    ) -> ModelResponse:
        started = time.perf_counter()
        stats, token = collecting()
        try:
            response = await self.inner.complete(
                request, sink=sink, caching=caching, conversation=conversation
            )
        except ProviderError as exc:
            self._failed(exc.code, stats, started, span, exc)
            raise
        except asyncio.CancelledError:
            # Abandoned (a turn's cancel, a summary attempt's timeout): not a provider error.
            self._failed("cancelled", stats, started, span, None)
            raise
        except Exception as exc:
            self._failed("internal", stats, started, span, exc)
            raise
        finally:
            stop_collecting(token)
        self._succeeded(response, stats, started, span)
        return response

    def _record_attempts(self, stats: CallStats, started: float, *, count_duration: bool) -> float:
        elapsed = time.perf_counter() - started
        if count_duration:
            self._duration.observe(elapsed)
        first_byte = stats.first_byte_seconds
        if first_byte is not None:
            self._first_byte.observe(first_byte)
        target = self._target
        for code in stats.retried:
            self._metrics.model_call_retries.labels(
                target.model_id, target.provider_kind, code
            ).inc()
        return elapsed

    def _succeeded(
        self, response: ModelResponse, stats: CallStats, started: float, span: trace.Span | None
    ) -> None:
        elapsed = self._record_attempts(stats, started, count_duration=True)
        usage = response.usage
        for counter, value in (
            (self._input, usage.input_tokens),
            (self._output, usage.output_tokens),
            (self._cached, usage.cached_tokens),
            (self._cache_creation, usage.cache_creation_tokens),
            (self._reasoning, usage.reasoning_tokens),
        ):
            if value:
                counter.inc(value)
        if span is not None:
            span.set_attributes(_response_attributes(response, stats))
        if log.isEnabledFor(logging.INFO):
            fields = self._fields(stats, elapsed)
            fields.update(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                cache_creation_tokens=usage.cache_creation_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                finish_reason=response.finish_reason,
                tool_calls=len(response.tool_calls),
                error_class=None,
            )
            event_line(log, logging.INFO, "model_call", "model call", fields)

    def _failed(
        self,
        error_class: str,
        stats: CallStats,
        started: float,
        span: trace.Span | None,
        exc: Exception | None,
    ) -> None:
        cancelled = error_class == "cancelled"
        elapsed = self._record_attempts(stats, started, count_duration=not cancelled)
        target = self._target
        if not cancelled:
            self._metrics.model_call_errors.labels(
                target.model_id, target.provider_kind, error_class
            ).inc()
        if span is not None:
            span.set_attributes(
                {"error.type": error_class, "ctxsvc.model_call.attempts": stats.attempts}
            )
            if not cancelled:
                span.set_status(Status(StatusCode.ERROR, error_class))
        level = logging.INFO if cancelled else logging.WARNING
        if log.isEnabledFor(level):
            fields = self._fields(stats, elapsed)
            fields["error_class"] = error_class
            if isinstance(exc, ProviderError):
                fields.update(
                    http_status=exc.status, semantic_output_received=exc.semantic_output_received
                )
            elif exc is not None:
                fields["exception_type"] = type(exc).__name__
            event_line(log, level, "model_call", "model call failed", fields)

    def _fields(self, stats: CallStats, elapsed: float) -> dict[str, Any]:
        target = self._target
        first_byte = stats.first_byte_seconds
        # The session and turn ids come with the line (``context.bound_work``).
        return dict(
            model_id=target.model_id,
            provider_kind=target.provider_kind,
            request_model=target.request_model,
            purpose=target.purpose,
            attempts=stats.attempts,
            retried=list(stats.retried),
            first_byte_ms=None if first_byte is None else round(first_byte * 1000, 2),
            duration_ms=round(elapsed * 1000, 2),
        )


def _request_attributes(target: CallTarget, request: dict[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": gen_ai_provider_name(target.provider_kind),
        "gen_ai.request.model": target.request_model,
        "ctxsvc.model_id": target.model_id,
        "ctxsvc.provider.kind": target.provider_kind,
        "ctxsvc.model_call.purpose": target.purpose,
        "ctxsvc.request.messages": len(request.get("messages", ())),
        "ctxsvc.request.tools": len(request.get("tools", ())),
    }
    max_tokens = request.get("max_output_tokens")
    if isinstance(max_tokens, int):
        attributes["gen_ai.request.max_tokens"] = max_tokens
    work = current_work()
    if work.session_id is not None:
        attributes["ctxsvc.session_id"] = work.session_id
    if work.turn_id is not None:
        attributes["ctxsvc.turn_id"] = work.turn_id
    return attributes


def _response_attributes(response: ModelResponse, stats: CallStats) -> dict[str, Any]:
    usage = response.usage
    attributes: dict[str, Any] = {
        "gen_ai.response.finish_reasons": (response.finish_reason,),
        "ctxsvc.model_call.attempts": stats.attempts,
        "ctxsvc.response.tool_calls": len(response.tool_calls),
    }
    for name, value in (
        ("gen_ai.usage.input_tokens", usage.input_tokens),
        ("gen_ai.usage.output_tokens", usage.output_tokens),
        ("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_tokens),
        ("ctxsvc.usage.reasoning_tokens", usage.reasoning_tokens),
    ):
        if value is not None:
            attributes[name] = value
    if stats.first_byte_seconds is not None:
        attributes["ctxsvc.model_call.first_byte_ms"] = round(stats.first_byte_seconds * 1000, 2)
    return attributes
