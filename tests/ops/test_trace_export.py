"""A real server exports its traces to a local OTLP endpoint, configured by ``OTEL_*`` only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import session_body
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.servers import ServerProcess, clean_env, free_port, uvicorn_command

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def test_a_turn_reaches_the_collector_as_one_trace(receiver: OtlpReceiver, tmp_path: Path) -> None:
    env = clean_env(
        CTXSVC_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'ctxsvc.db'}",
        CTXSVC_JSON_LOGS="false",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_SERVICE_NAME="ctxsvc-under-test",
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        env.pop(name, None)
    server = ServerProcess(
        uvicorn_command(free_port()), env, cwd=tmp_path, log_path=tmp_path / "log"
    )
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as api:
            sid = api.post("/v1/sessions", json=session_body()).json()["id"]
            turn = api.post(
                f"/v1/sessions/{sid}/turns",
                params={"wait": "true"},
                json={"client_request_id": "a", "input": [{"type": "text", "text": "hello"}]},
            ).json()
            assert turn["status"] == "completed", turn

        def has_turn(spans: list[ReceivedSpan]) -> bool:
            return any(s.name == "turn" for s in spans) and any(
                s.name == "POST /v1/sessions/{session_id}/turns" for s in spans
            )

        spans = receiver.wait_for(has_turn)
    finally:
        server.stop()
    (request,) = [s for s in spans if s.name == "POST /v1/sessions/{session_id}/turns"]
    (leg,) = [s for s in spans if s.name == "turn"]
    assert leg.trace_id == request.trace_id
    assert leg.parent_span_id == request.span_id
    assert leg.attributes["ctxsvc.turn_id"] == turn["turn_id"]
    assert leg.resource["service.name"] == "ctxsvc-under-test"
    chats = [s for s in spans if s.name == "chat local" and s.trace_id == request.trace_id]
    assert len(chats) == 1
    assert chats[0].attributes["gen_ai.provider.name"] == "ctxsvc.local"
    assert chats[0].attributes["gen_ai.usage.output_tokens"] > 0
    assert any(s.trace_id == request.trace_id and "db.statement" in s.attributes for s in spans)
