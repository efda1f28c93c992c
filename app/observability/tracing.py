"""OpenTelemetry traces, configured only by the standard ``OTEL_*`` environment variables.

Off unless the environment asks for traces: ``OTEL_TRACES_EXPORTER`` naming an exporter other
than ``none``, or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) without it. ``OTEL_SDK_DISABLED=true`` turns them off
whatever else is set. Off means no tracer at all: no instrumentation is installed and every
span helper of the service returns at its first check.

When on, the SDK reads the rest itself: the endpoint, headers, timeout, compression and
certificates of the OTLP exporter, the sampler (``OTEL_TRACES_SAMPLER``), the batch processor's
limits (``OTEL_BSP_*``), the resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``;
``service.name`` defaults to ``ctxsvc``; the SDK gives every process its own
``service.instance.id``) and the propagators (``OTEL_PROPAGATORS``). Exporters:
``otlp`` (``http/protobuf``, the default protocol; ``grpc`` needs
``opentelemetry-exporter-otlp-proto-grpc`` installed), ``console`` and any other installed one
by its entry-point name. FastAPI (one server span per request but probes and scrapes, unless
``OTEL_PYTHON_FASTAPI_EXCLUDED_URLS`` says otherwise), the provider HTTP client (one
client span per provider request, ``traceparent`` propagated: ``provider_requests``) and
SQLAlchemy (one span per statement; one per batch of deferred writes,
``app.storage.deferred``) are instrumented per app, with this app's tracer provider.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.deferred import observe_flushes

__all__ = [
    "TracingConfigError",
    "context_of",
    "instrument_app",
    "instrument_engine",
    "traceparent_of",
    "tracer_provider_from_env",
    "traces_wanted",
]

INSTRUMENTATION_NAME = "ctxsvc"
_TRACEPARENT = TraceContextTextMapPropagator()
# The instrumentations would otherwise record HTTP and database metrics through the global
# meter provider; ctxsvc's metrics are Prometheus'.
_NO_METERS = NoOpMeterProvider()


class TracingConfigError(ValueError):
    """The ``OTEL_*`` variables ask for an exporter that cannot be built here."""


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    raw = env.get("OTEL_TRACES_EXPORTER")
    if raw is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    return [n.strip().lower() for n in raw.split(",") if n.strip() and n.strip() != "none"]


def traces_wanted(env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(_exporter_names(env))


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    if name == "otlp":
        protocol = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        entry = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}.get(protocol)
        if entry is None:
            raise TracingConfigError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf "
                "(or grpc with opentelemetry-exporter-otlp-proto-grpc installed)"
            )
        name = entry
    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER names {name!r}, but no such span exporter is installed "
            "(ctxsvc ships otlp over http/protobuf and console)"
        )
    exporter: SpanExporter = next(iter(found)).load()()
    return exporter


def tracer_provider_from_env(env: Mapping[str, str], version: str) -> TracerProvider | None:
    """The tracer provider the environment asks for, or ``None`` (traces off)."""
    if not traces_wanted(env):
        return None
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME; only what they do
    # not say is filled in.
    resource = Resource.create()
    defaults: dict[str, Any] = {}
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        defaults[SERVICE_NAME] = "ctxsvc"
    if SERVICE_VERSION not in resource.attributes:
        defaults[SERVICE_VERSION] = version
    provider = TracerProvider(resource=resource.merge(Resource(defaults)), shutdown_on_exit=False)
    for name in _exporter_names(env):
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    return provider


# Probes and scrapes would each be a trace every few seconds; the instrumentation's own
# variables (OTEL_PYTHON_FASTAPI_EXCLUDED_URLS, OTEL_PYTHON_EXCLUDED_URLS) replace this list.
_DEFAULT_EXCLUDED_URLS = "/healthz$,/readyz$,/metrics$"


def instrument_app(app: FastAPI, provider: trace.TracerProvider, env: Mapping[str, str]) -> None:
    """One server span per request (named after the route template), none for probes and
    scrapes; no span per ASGI message (a streamed answer would add one per event)."""
    configured = "OTEL_PYTHON_FASTAPI_EXCLUDED_URLS" in env or "OTEL_PYTHON_EXCLUDED_URLS" in env
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        meter_provider=_NO_METERS,
        excluded_urls=None if configured else _DEFAULT_EXCLUDED_URLS,
        exclude_spans=["receive", "send"],
    )


def instrument_engine(engine: AsyncEngine, provider: trace.TracerProvider) -> None:
    """One span per statement of this engine (the statement text, never its parameters)."""
    tracer = trace.get_tracer("opentelemetry.instrumentation.sqlalchemy", tracer_provider=provider)
    usage = _NO_METERS.get_meter("sqlalchemy").create_up_down_counter("db.client.connections")
    EngineTracer(tracer, engine.sync_engine, usage)  # type: ignore[no-untyped-call]

    @contextmanager
    def batch(connection: Connection, statements: Sequence[str]) -> Iterator[object]:
        # Deferred writes go to the driver in one batch (one round trip on PostgreSQL), past
        # the events EngineTracer listens to: one span for the batch, named and described as
        # OpenTelemetry's database conventions name a batch.
        if not is_instrumentation_enabled():
            yield None
            return
        database = connection.engine.url.database
        name = f"BATCH {database}" if database else "BATCH"
        with tracer.start_as_current_span(name, kind=trace.SpanKind.CLIENT) as span:
            span.set_attribute("db.system", connection.dialect.name)
            if database:
                span.set_attribute("db.name", database)
            span.set_attribute("db.operation.batch.size", len(statements))
            span.set_attribute("db.statement", ";\n".join(statements))
            yield span

    observe_flushes(engine, batch)


def traceparent_of(span: trace.Span) -> str | None:
    """The W3C ``traceparent`` of ``span`` (``None`` for a span that is not recorded)."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    carrier: dict[str, str] = {}
    _TRACEPARENT.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent")


def context_of(traceparent: str | None) -> Context | None:
    """The context whose current span is the one ``traceparent`` names (``None`` if unusable)."""
    if not traceparent:
        return None
    context = _TRACEPARENT.extract({"traceparent": traceparent})
    return context if trace.get_current_span(context).get_span_context().is_valid else None
