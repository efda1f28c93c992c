"""``/metrics`` after work with known figures: a scripted turn's tokens and outcome, a failed
turn, retries, compactions, every route by its template, and the process itself."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.samples import Sample

from tests.api.helpers import append, new_session, scripted_model, user
from tests.api.test_turns import agent, call, ok, post_results
from tests.observability.conftest import Served, provider_model, serve
from tests.ops.test_observability import samples, value
from tests.providers.fakes import (
    FakeProviderServer,
    StreamReply,
    openai_error,
    openai_stream,
    openai_usage,
)
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served(database_url: str) -> AsyncIterator[Served]:
    async for s in serve(
        database_url, summary_retry_delay_seconds=0.0, summary_attempt_timeout_seconds=5.0
    ):
        yield s


async def scrape(api: httpx.AsyncClient) -> list[Sample]:
    response = await api.get("/metrics")
    assert response.status_code == 200
    return samples(response.text)


def absent(found: list[Sample], name: str, **labels: str) -> bool:
    return not [s for s in found if s.name == name and labels.items() <= s.labels.items()]


async def test_a_scripted_turn_counts_its_tokens_calls_and_outcome(served: Served) -> None:
    api = served.api
    script = [
        {
            "tool_calls": [call("read", path="a")],
            "usage": {
                "input_tokens": 100,
                "output_tokens": 10,
                "cached_tokens": 40,
                "reasoning_tokens": 3,
            },
        },
        {"text": "done", "usage": {"input_tokens": 150, "output_tokens": 5, "cached_tokens": 90}},
    ]
    model_id = await scripted_model(api, script)
    sid = await new_session(api, model_id=model_id, agent=agent())
    started = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "c1", "input": [{"type": "text", "text": "go"}]},
    )
    turn = started.json()
    assert turn["phase"] == "waiting_tool_results"
    waiting = await scrape(api)
    assert value(waiting, "ctxsvc_turns_started_total") == 1
    assert absent(waiting, "ctxsvc_turns_finished_total")  # not finished yet
    # The same client_request_id again is a replay, not a new turn.
    replay = await api.post(
        f"/v1/sessions/{sid}/turns",
        json={"client_request_id": "c1", "input": [{"type": "text", "text": "go"}]},
    )
    assert replay.status_code == 200
    (pending,) = turn["pending_tool_calls"]
    done = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert done.json()["status"] == "completed", done.text

    found = await scrape(api)
    assert value(found, "ctxsvc_turns_started_total") == 1
    assert value(found, "ctxsvc_turns_finished_total", status="completed", code="none") == 1
    assert value(found, "ctxsvc_turn_duration_seconds_count", status="completed") == 1
    model = {"model": model_id}
    assert value(found, "ctxsvc_model_input_tokens_total", **model) == 250
    assert value(found, "ctxsvc_model_output_tokens_total", **model) == 15
    assert value(found, "ctxsvc_model_cached_tokens_total", **model) == 130
    assert value(found, "ctxsvc_model_reasoning_tokens_total", **model) == 3
    calls = {"model": model_id, "provider_kind": "scripted", "purpose": "turn"}
    assert value(found, "ctxsvc_model_call_duration_seconds_count", **calls) == 2
    assert absent(found, "ctxsvc_model_call_errors_total", model=model_id)
    # Every model call's request was prepared, and World State sampled for it (the step of a
    # tool round captures the inputs for the next call before it knows the round waits).
    assert value(found, "ctxsvc_prepare_duration_seconds_count", kind="turn") == 2
    assert value(found, "ctxsvc_world_state_duration_seconds_count", phase="write") == 2
    assert value(found, "ctxsvc_world_state_duration_seconds_count", phase="capture") == 3
    assert value(found, "ctxsvc_world_state_duration_seconds_count", source="none") == 5
    # The calibration samples: reported / estimated, as the model's calibration shows them.
    calibration = (await api.get(f"/v1/models/{model_id}")).json()["calibration"]
    ratios = [
        s["reported_input_tokens"] / s["estimated_input_tokens"] for s in calibration["samples"]
    ]
    labels = {"model": model_id, "counter": "estimate"}
    assert value(found, "ctxsvc_calibration_ratio_count", **labels) == 2
    assert value(found, "ctxsvc_calibration_ratio_sum", **labels) == pytest.approx(sum(ratios))


async def test_a_failed_turn_counts_the_error_by_class_and_the_outcome_by_code(
    served: Served,
) -> None:
    api = served.api
    model_id = await scripted_model(api, [{"error": "server_error"}])
    sid = await new_session(api, model_id=model_id, agent=agent())
    response = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "f1", "input": [{"type": "text", "text": "go"}]},
    )
    assert response.json()["outcome"]["code"] == "model_error"
    found = await scrape(api)
    labels = {"model": model_id, "provider_kind": "scripted"}
    assert value(found, "ctxsvc_model_call_errors_total", error_class="server_error", **labels) == 1
    assert value(found, "ctxsvc_turns_finished_total", status="failed", code="model_error") == 1
    assert absent(found, "ctxsvc_turns_finished_total", status="completed")
    assert value(found, "ctxsvc_model_input_tokens_total", model=model_id) == 0


async def test_retried_attempts_and_first_bytes_of_a_provider_call(
    served: Served, provider: FakeProviderServer
) -> None:
    api = served.api
    provider.enqueue(
        openai_error(503, "busy", type="server_error", headers={"retry-after-ms": "1"}),
        StreamReply(openai_stream(text=["ok"], usage=openai_usage(30, 2, cached=10))),
    )
    model_id = await provider_model(api, provider)
    sid = await new_session(api, model_id=model_id, agent=agent())
    response = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "go"}]},
    )
    assert response.json()["status"] == "completed"
    found = await scrape(api)
    labels = {"model": model_id, "provider_kind": "openai_chat"}
    assert (
        value(found, "ctxsvc_model_call_retries_total", error_class="server_error", **labels) == 1
    )
    # A retried call that then answered is no error.
    assert absent(found, "ctxsvc_model_call_errors_total", model=model_id)
    assert value(found, "ctxsvc_model_call_duration_seconds_count", **labels) == 1
    assert value(found, "ctxsvc_model_call_first_byte_seconds_count", **labels) == 1
    assert value(found, "ctxsvc_model_input_tokens_total", model=model_id) == 30
    assert value(found, "ctxsvc_model_cached_tokens_total", model=model_id) == 10


async def test_compactions_count_by_kind_and_outcome_with_the_tokens_saved(
    served: Served,
) -> None:
    api = served.api
    summarizer = await scripted_model(api, [{"text": VALID, "usage": {"input_tokens": 900}}])
    sid = await new_session(api, summary_model_id=summarizer)
    conversation = [user(f"step {i}: " + "words " * 200) for i in range(4)]
    assert (await append(api, sid, *conversation)).status_code == 201
    checkpoint = (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    failing = await scripted_model(api, [{"error": "server_error"}] * 3)
    other = await new_session(api, summary_model_id=failing)
    assert (await append(api, other, *conversation)).status_code == 201
    failed = await api.post(f"/v1/sessions/{other}/compactions", json={"allow_larger": True})
    assert failed.json()["code"] == "summary_retries_exhausted"

    found = await scrape(api)
    assert value(found, "ctxsvc_compactions_total", kind="manual", outcome="completed") == 1
    assert (
        value(found, "ctxsvc_compactions_total", kind="manual", outcome="summary_retries_exhausted")
        == 1
    )
    saved = checkpoint["conversation_tokens_before"] - checkpoint["conversation_tokens_after"]
    assert saved > 0
    assert value(found, "ctxsvc_compaction_saved_tokens_total", kind="manual") == saved
    for phase in ("prepare", "summary", "persistence", "install"):
        assert value(found, "ctxsvc_compaction_phase_duration_seconds_count", phase=phase) == 1
    assert (
        value(found, "ctxsvc_compaction_duration_seconds_count", kind="manual", outcome="completed")
        == 1
    )
    summary = {"model": failing, "provider_kind": "scripted"}
    assert (
        value(found, "ctxsvc_model_call_errors_total", error_class="server_error", **summary) == 3
    )
    assert (
        value(
            found, "ctxsvc_model_call_duration_seconds_count", purpose="summary", model=summarizer
        )
        == 1
    )
    assert value(found, "ctxsvc_model_input_tokens_total", model=summarizer) == 900


@pytest.mark.parametrize(
    ("path", "template"),
    [
        ("/docs", "/docs"),
        ("/openapi.json", "/openapi.json"),
        ("/redoc", "/redoc"),
        ("/healthz", "/healthz"),
        ("/ui", "/ui"),
        ("/ui/static/ui.css", "/ui/static/{path}"),  # mounted files: one series for all
    ],
)
async def test_every_route_is_counted_by_its_template(
    served: Served, path: str, template: str
) -> None:
    assert (await served.api.get(path)).status_code == 200
    assert (await served.api.get("/no/such/path")).status_code == 404
    found = await scrape(served.api)
    assert value(found, "ctxsvc_http_requests_total", route=template, status="200") == 1
    assert value(found, "ctxsvc_http_requests_total", route="unmatched", status="404") == 1
    assert not any(s.labels.get("route") == "/no/such/path" for s in found)


async def test_the_process_collector_reports_memory_cpu_descriptors_and_gc(
    served: Served,
) -> None:
    found = await scrape(served.api)
    assert value(found, "process_resident_memory_bytes") > 1_000_000
    assert value(found, "process_open_fds") > 0
    assert value(found, "process_cpu_seconds_total") > 0
    assert value(found, "python_gc_collections_total", generation="0") >= 0
    assert any(s.name == "python_info" for s in found)


async def test_every_kind_of_prepare_is_timed(served: Served) -> None:
    api = served.api
    sid = await new_session(api)
    assert (await append(api, sid, user("hello"))).status_code == 201
    body = {
        "model_id": "local",
        "system_context": [],
        "conversation": [user("hi")],
        "tools": [],
    }
    assert (await api.post("/v1/prepare", json=body)).status_code == 200
    assert (await api.post("/v1/tokens/count", json={"prepare": body})).status_code == 200
    assert (await api.post(f"/v1/sessions/{sid}/prepare", json={})).status_code == 200
    assert (await api.get(f"/v1/sessions/{sid}/context")).status_code == 200
    found = await scrape(api)
    for kind in ("stateless", "tokens", "session", "inspection"):
        assert value(found, "ctxsvc_prepare_duration_seconds_count", kind=kind) == 1, kind
