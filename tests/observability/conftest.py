"""Fixtures for what an operator sees: the JSON log lines, the metrics text and the spans of an
app serving real requests (ASGI client, loopback fake providers)."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.main import create_app
from app.observability import JsonFormatter
from tests.conftest import make_settings
from tests.providers.fakes import FakeProviderServer

FAKE_KEY_ENV = "CTXSVC_TEST_OBSERVED_KEY"
# The provider key: it must never reach a log line.
FAKE_KEY = "sk-observed-key-c9e8b1d4"


@dataclass
class Lines:
    """Every log record written while the fixture is active, formatted as the service writes
    them (``JsonFormatter``), at DEBUG: the strictest view of what a log could leak."""

    stream: io.StringIO = field(default_factory=io.StringIO)

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def all(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text.splitlines() if line.strip()]

    def events(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return [
            line
            for line in self.all()
            if line.get("event") == event and all(line.get(k) == v for k, v in match.items())
        ]

    def one(self, event: str, **match: Any) -> dict[str, Any]:
        found = self.events(event, **match)
        assert len(found) == 1, (event, match, found)
        return found[0]


@pytest.fixture
def lines() -> Iterator[Lines]:
    captured = Lines()
    handler = logging.StreamHandler(captured.stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@dataclass
class Served:
    app: FastAPI
    api: httpx.AsyncClient
    exporter: InMemorySpanExporter | None = None

    def spans(self) -> list[ReadableSpan]:
        assert self.exporter is not None
        return list(self.exporter.get_finished_spans())


async def serve(
    database_url: str, *, traced: bool = False, **settings: Any
) -> AsyncIterator[Served]:
    exporter = InMemorySpanExporter() if traced else None
    provider = None
    if exporter is not None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(make_settings(database_url, **settings), tracer_provider=provider)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            yield Served(app, api, exporter)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    with FakeProviderServer() as server:
        yield server


async def provider_model(
    api: httpx.AsyncClient, server: FakeProviderServer, kind: str = "openai_chat"
) -> str:
    """A registered model on the fake provider (``kind``: its wire protocol)."""
    model_id = f"fake-{uuid.uuid4().hex[:8]}"
    base_url = server.base_url + ("/v1" if kind == "openai_chat" else "")
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": kind,
            "base_url": base_url,
            "model_name": f"{kind}-fake",
            "api_key_env": FAKE_KEY_ENV,
        },
    }
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    return model_id
