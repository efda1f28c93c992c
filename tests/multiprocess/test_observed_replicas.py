"""A turn that crosses replicas stays one story: the replica that resumes it after the caller's
tool results writes its lines with the same turn id, and its leg joins the trace the first
replica started (linked to the request that resumed it), exported by each to one collector."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session, scripted_model
from tests.api.test_turns import agent, call, ok
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def collector() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def observed_replicas(
    postgres_url: str, collector: OtlpReceiver, tmp_path: Path
) -> Iterator[list[ServerProcess]]:
    env = clean_env(
        CTXSVC_JSON_LOGS="true",
        CTXSVC_LOG_LEVEL="INFO",
        CTXSVC_DATABASE_URL=postgres_url,
        CTXSVC_MIGRATE_ON_START="false",
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"):
        env.pop(name, None)
    commands = [uvicorn_command(free_port()) for _ in range(2)]
    with running(commands, env=env, cwd=tmp_path) as servers:
        yield servers


def json_lines(server: ServerProcess) -> list[dict[str, Any]]:
    found = []
    for line in server.log().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


async def test_a_turn_resumed_on_another_replica_keeps_its_ids_and_its_trace(
    observed_replicas: list[ServerProcess], collector: OtlpReceiver
) -> None:
    first, second = observed_replicas
    async with (
        httpx.AsyncClient(base_url=first.url, timeout=30) as a,
        httpx.AsyncClient(base_url=second.url, timeout=30) as b,
    ):
        script = [{"tool_calls": [call("read", path="a")]}, {"text": "ok"}]
        model_id = await scripted_model(a, script)
        sid = await new_session(a, model_id=model_id, agent=agent())
        started = await a.post(
            f"/v1/sessions/{sid}/turns",
            params={"wait": "true"},
            json={"client_request_id": "x", "input": [{"type": "text", "text": "go"}]},
            headers={"X-Request-ID": "start-on-a"},
        )
        turn = started.json()
        assert turn["phase"] == "waiting_tool_results", turn
        (pending,) = turn["pending_tool_calls"]
        done = await b.post(
            f"/v1/sessions/{sid}/turns/{turn['turn_id']}/tool-results",
            params={"wait": "true"},
            json={"results": [ok(pending["tool_call_id"])]},
            headers={"X-Request-ID": "results-on-b"},
        )
        assert done.json()["status"] == "completed", done.text
    turn_id = turn["turn_id"]

    def both_legs(spans: list[ReceivedSpan]) -> bool:
        return len([s for s in spans if s.name == "turn"]) == 2

    spans = collector.wait_for(both_legs)
    (start_request,) = [s for s in spans if s.name == "POST /v1/sessions/{session_id}/turns"]
    (results_request,) = [
        s for s in spans if s.name == "POST /v1/sessions/{session_id}/turns/{turn_id}/tool-results"
    ]
    legs = [s for s in spans if s.name == "turn"]
    assert {s.attributes["ctxsvc.turn_id"] for s in legs} == {turn_id}
    assert {s.trace_id for s in legs} == {start_request.trace_id}
    assert {s.parent_span_id for s in legs} == {start_request.span_id}
    (resumed,) = [s for s in legs if s.attributes["ctxsvc.turn.resumed"]]
    assert resumed.links == [(results_request.trace_id, results_request.span_id)]
    # Each replica exported its own leg.
    instance = "service.instance.id"
    assert resumed.resource[instance] != start_request.resource[instance]

    # The lines of each replica: the same turn id, each with the request id that ran the leg.
    first_lines = [line for line in json_lines(first) if line.get("turn_id") == turn_id]
    second_lines = [line for line in json_lines(second) if line.get("turn_id") == turn_id]
    assert {line["event"] for line in first_lines} >= {"turn_accepted", "model_call"}
    assert {line["event"] for line in second_lines} >= {"model_call", "turn_finished"}
    assert {line["request_id"] for line in first_lines} == {"start-on-a"}
    assert {line["request_id"] for line in second_lines} == {"results-on-b"}
    (finished,) = [line for line in second_lines if line.get("event") == "turn_finished"]
    assert (finished["status"], finished["model_calls"]) == ("completed", 2)
    assert finished["trace_id"] == start_request.trace_id
