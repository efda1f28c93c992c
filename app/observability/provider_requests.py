"""One client span per provider request, with ``traceparent`` sent to the provider.

The provider adapters' aiohttp session (``app.providers.http_client``) is given this trace
config when traces are on: the span the httpx instrumentation gave each provider request until
the adapters moved to aiohttp, kept by hand rather than by
``opentelemetry-instrumentation-aiohttp-client`` (``docs/decisions.md``, "Provider HTTP client").

The span is named after the method (``POST``), a child of the model call's ``chat …`` span, from
sending the request until its response's status line and headers (the body streams after it,
inside the model-call span). Its attributes follow the HTTP semantic conventions the other
instrumentations use: the older names by default (``http.method``, ``http.url``,
``http.status_code``), the stable ones with ``OTEL_SEMCONV_STABILITY_OPT_IN=http``
(``http.request.method``, ``url.full``, ``server.address``, ``server.port``,
``http.response.status_code``, ``error.type``) and both with ``http/dup``. A status of 400 or
more, or a failure (a refused or dropped connection, a timeout), sets the status ``ERROR``; a
request abandoned by a cancel or one of the adapter's own deadlines just ends (the model-call
span says why). The URL is recorded without credentials or query; the headers never are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import SimpleNamespace

import aiohttp
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

__all__ = ["provider_request_tracing"]

_SCOPE = "ctxsvc.provider_requests"


def _conventions(env: Mapping[str, str]) -> tuple[bool, bool]:
    """(older names, stable names), as ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks."""
    options = {o.strip().lower() for o in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")}
    if "http/dup" in options:
        return True, True
    if "http" in options:
        return False, True
    return True, False


def provider_request_tracing(
    provider: trace.TracerProvider, env: Mapping[str, str]
) -> aiohttp.TraceConfig:
    """A trace config recording each request of a session with ``provider``'s tracer."""
    tracer = provider.get_tracer(_SCOPE)
    older, stable = _conventions(env)

    async def started(
        _session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        url = params.url
        shown = str(url.with_user(None).with_query(None))
        attributes: dict[str, str | int] = {}
        if older:
            attributes.update({"http.method": params.method, "http.url": shown})
        if stable:
            attributes.update({"http.request.method": params.method, "url.full": shown})
            if url.host is not None:
                attributes["server.address"] = url.host
            if url.port is not None:
                attributes["server.port"] = url.port
        span = tracer.start_span(params.method, kind=SpanKind.CLIENT, attributes=attributes)
        context.span = span
        # The request's own header map: what is injected here is sent.
        propagate.inject(params.headers, context=trace.set_span_in_context(span))

    async def answered(
        _session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        span: trace.Span = context.span
        status = params.response.status
        if older:
            span.set_attribute("http.status_code", status)
        if stable:
            span.set_attribute("http.response.status_code", status)
        if status >= 400:
            if stable:
                span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    async def failed(
        _session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestExceptionParams,
    ) -> None:
        span: trace.Span = context.span
        error = params.exception
        if not isinstance(error, asyncio.CancelledError):
            name = type(error).__qualname__
            if stable:
                span.set_attribute("error.type", name)
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, name))
        span.end()

    config = aiohttp.TraceConfig()
    config.on_request_start.append(started)
    config.on_request_end.append(answered)
    config.on_request_exception.append(failed)
    return config
