"""The provider request spans (``app.observability.provider_requests``): what an operator's trace
shows of each HTTP request an adapter sends, and the ``traceparent`` the provider receives."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.observability.provider_requests import provider_request_tracing
from app.providers.base import ProviderConfig, ProviderError, RetryPolicy, Timeouts
from app.providers.http_client import ProviderHTTP
from app.providers.openai_chat import OpenAIChatClient
from tests.providers.encoding.requests import msg, prepared, text
from tests.providers.fakes import ErrorReply, FakeProviderServer, StreamReply, openai_stream

pytestmark = pytest.mark.anyio


@dataclass
class Traced:
    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    made: list[ProviderHTTP]

    def http(self, env: dict[str, str] | None = None) -> ProviderHTTP:
        tracing = provider_request_tracing(self.tracer_provider, env or {})
        http = ProviderHTTP(allow_private_hosts=True, trace_configs=[tracing])
        self.made.append(http)
        return http

    def spans(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]


@pytest.fixture
async def traced() -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    found = Traced(tracer_provider, exporter, [])
    yield found
    for http in found.made:
        await http.aclose()
    tracer_provider.shutdown()


async def call(traced: Traced, http: ProviderHTTP, base_url: str) -> Any:
    """One model call inside a ``chat`` span, as the model-call observer makes it."""
    adapter = OpenAIChatClient(
        http,
        ProviderConfig("openai_chat", base_url + "/v1", "gpt-test", "KEY"),
        env={"KEY": "sk-secret-key"},
        retry=RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01),
        timeouts=Timeouts(first_byte=10, idle=10, total=30),
    )
    with traced.tracer_provider.get_tracer("test").start_as_current_span("chat gpt-test"):
        return await adapter.complete(prepared(msg("user", text("hello"))))


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_request_is_a_client_span_whose_context_the_provider_receives(
    traced: Traced, provider: FakeProviderServer
) -> None:
    provider.enqueue(StreamReply(openai_stream(text=["hi"])))
    await call(traced, traced.http(), provider.base_url)
    [chat] = traced.spans("chat gpt-test")
    [request] = traced.spans("POST")
    assert request.kind is SpanKind.CLIENT
    assert request.parent is not None
    assert request.parent.span_id == chat.context.span_id
    assert attributes(request) == {
        "http.method": "POST",
        "http.url": provider.base_url + "/v1/chat/completions",
        "http.status_code": 200,
    }
    assert request.status.status_code is StatusCode.UNSET
    _version, trace_id, parent_id, _flags = provider.requests[0].headers["traceparent"].split("-")
    assert (trace_id, parent_id) == (
        format(request.context.trace_id, "032x"),
        format(request.context.span_id, "016x"),
    )
    # Nothing of the request but its method and URL: never the key.
    assert "sk-secret-key" not in str(attributes(request))


async def test_a_refused_answer_and_a_failed_connection_are_errors(
    traced: Traced, provider: FakeProviderServer
) -> None:
    provider.enqueue(ErrorReply(503, {"error": {"message": "busy"}}))
    provider.enqueue(StreamReply(openai_stream(text=["hi"])))
    await call(traced, traced.http(), provider.base_url)
    refused, answered = sorted(traced.spans("POST"), key=lambda s: s.start_time or 0)
    assert (refused.status.status_code, attributes(refused)["http.status_code"]) == (
        StatusCode.ERROR,
        503,
    )
    assert answered.status.status_code is StatusCode.UNSET

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    traced.exporter.clear()
    with pytest.raises(ProviderError):
        await call(traced, traced.http(), f"http://127.0.0.1:{port}")
    for failed in traced.spans("POST"):
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.status.description == "ClientConnectorError"
        assert [event.name for event in failed.events] == ["exception"]


@pytest.mark.parametrize(
    ("opt_in", "names"),
    [
        (
            "http",
            {
                "http.request.method",
                "url.full",
                "server.address",
                "server.port",
                "http.response.status_code",
            },
        ),
        (
            "http/dup",
            {
                "http.method",
                "http.url",
                "http.status_code",
                "http.request.method",
                "url.full",
                "server.address",
                "server.port",
                "http.response.status_code",
            },
        ),
    ],
)
async def test_the_stable_http_conventions_when_asked_for(
    traced: Traced, provider: FakeProviderServer, opt_in: str, names: set[str]
) -> None:
    provider.enqueue(StreamReply(openai_stream(text=["hi"])))
    http = traced.http({"OTEL_SEMCONV_STABILITY_OPT_IN": opt_in})
    await call(traced, http, provider.base_url)
    [request] = traced.spans("POST")
    found = attributes(request)
    assert set(found) == names
    if "http.response.status_code" in names:
        assert (found["server.address"], found["server.port"]) == ("127.0.0.1", provider.port)
        assert found["http.response.status_code"] == 200
