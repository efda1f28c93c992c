"""Traces are configured by the standard ``OTEL_*`` variables only, and off unless they ask."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from app.main import create_app
from app.observability import TracingConfigError
from app.observability.tracing import tracer_provider_from_env, traces_wanted
from app.storage.database import unit_of_work
from app.storage.repositories.turns import TurnRepository
from tests.api.test_turns import agent
from tests.conftest import make_settings
from tests.observability.conftest import provider_model
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console,none"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT + "/v1/traces"}, True),
        # An endpoint does not turn traces on when the exporter list says none.
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, True),
        # Metrics and logs exporters are not traces.
        ({"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp"}, False),
    ],
)
def test_traces_are_on_only_when_the_environment_asks(env: dict[str, str], wanted: bool) -> None:
    assert traces_wanted(env) is wanted
    assert (tracer_provider_from_env(env, "9.9") is not None) is wanted


def exporters(provider: TracerProvider) -> list[object]:
    processors = provider._active_span_processor._span_processors
    assert all(isinstance(p, BatchSpanProcessor) for p in processors)
    return [p.span_exporter for p in processors]  # type: ignore[attr-defined]


def test_an_otlp_endpoint_exports_over_http_protobuf_with_the_service_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = tracer_provider_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, "1.2.3")
    assert provider is not None
    (exporter,) = exporters(provider)
    assert isinstance(exporter, OTLPSpanExporter)
    assert provider.resource.attributes["service.name"] == "ctxsvc"
    assert provider.resource.attributes["service.version"] == "1.2.3"
    # Every process its own (a turn's legs may run on several replicas).
    assert provider.resource.attributes["service.instance.id"]
    provider.shutdown()


def test_the_resource_variables_win_over_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ctxsvc-eu")
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,service.instance.id=eu-1"
    )
    provider = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"}, "1.2.3")
    assert provider is not None
    (exporter,) = exporters(provider)
    assert isinstance(exporter, ConsoleSpanExporter)
    assert provider.resource.attributes["service.name"] == "ctxsvc-eu"
    assert provider.resource.attributes["deployment.environment"] == "staging"
    assert provider.resource.attributes["service.instance.id"] == "eu-1"
    provider.shutdown()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "otlp_proto_grpc",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
            "http/json",
        ),
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "'jaeger'"),
    ],
    ids=["grpc-not-installed", "http-json", "unknown-exporter"],
)
def test_an_exporter_that_cannot_be_built_is_refused_at_start_up(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(TracingConfigError, match=message):
        tracer_provider_from_env(env, "1")


@pytest.fixture
async def untraced_api(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[object, httpx.AsyncClient]]:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    app = create_app(make_settings(sqlite_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            yield app, api


async def test_without_otel_variables_nothing_is_instrumented(
    untraced_api: tuple[object, httpx.AsyncClient], provider: FakeProviderServer
) -> None:
    app, api = untraced_api
    assert app.state.container.observability.tracer is None  # type: ignore[attr-defined]
    assert not getattr(app, "_is_instrumented_by_opentelemetry", False)
    provider.enqueue(StreamReply(openai_stream(text=["hi"])))
    model_id = await provider_model(api, provider)
    sid = (await api.post("/v1/sessions", json={"model_id": model_id, "agent": agent()})).json()[
        "id"
    ]
    turn = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "x", "input": [{"type": "text", "text": "go"}]},
    )
    assert turn.json()["status"] == "completed"
    # No trace context travels to the provider, and none is stored with the turn.
    assert "traceparent" not in provider.requests[0].headers
    container = app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db, read_only=True) as db:
        row = await TurnRepository(db).get(sid, turn.json()["turn_id"])
    assert row is not None
    assert row.trace_context is None
