"""The log lines an operator reads: one per accepted and finished turn, per model call, per
compaction and per refused request, with their ids, counts and codes, and never content."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from app.storage.base import utc_now
from app.storage.database import unit_of_work
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import append, new_session, scripted_model, user
from tests.api.test_turns import agent, call, ok
from tests.observability.conftest import FAKE_KEY, Lines, Served, provider_model, serve
from tests.ops.test_observability import samples, value
from tests.providers.fakes import (
    FakeProviderServer,
    FakeToolCall,
    StreamReply,
    openai_error,
    openai_stream,
    openai_usage,
)

pytestmark = pytest.mark.anyio

# Content that goes through a turn; none of it may reach a log line.
SECRETS = {
    "system prompt": "system-secret-7f3a02",
    "user text": "user-secret-91bd44",
    "tool arguments": "argument-secret-3d2f67",
    "tool output": "tool-output-secret-55c1aa",
    "model text": "answer-secret-a0e4bb",
    "reasoning": "reasoning-secret-e71c09",
    "provider key": FAKE_KEY,
}


@pytest.fixture
async def served(database_url: str) -> AsyncIterator[Served]:
    async for s in serve(
        database_url, summary_retry_delay_seconds=0.0, summary_attempt_timeout_seconds=5.0
    ):
        yield s


def start(text: str, crid: str | None = None) -> dict[str, Any]:
    return {
        "client_request_id": crid or uuid.uuid4().hex,
        "input": [{"type": "text", "text": text}],
    }


async def test_a_completed_turn_with_a_tool_round_trip_is_logged_by_ids_and_counts(
    served: Served, provider: FakeProviderServer, lines: Lines
) -> None:
    api = served.api
    call = FakeToolCall("call-1", "read", ['{"path": "', SECRETS["tool arguments"], '"}'])
    provider.enqueue(
        StreamReply(
            openai_stream(
                reasoning=[SECRETS["reasoning"]],
                tool_calls=[call],
                finish_reason="tool_calls",
                usage=openai_usage(120, 15, cached=100),
            )
        ),
        StreamReply(openai_stream(text=[SECRETS["model text"]], usage=openai_usage(160, 7))),
    )
    model_id = await provider_model(api, provider)
    sid = await new_session(
        api, model_id=model_id, agent=agent(system_prompt=SECRETS["system prompt"])
    )
    started = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json=start(SECRETS["user text"]),
        headers={"X-Request-ID": "start-req-1"},
    )
    assert started.status_code == 202, started.text
    turn_id = started.json()["turn_id"]
    assert started.json()["phase"] == "waiting_tool_results"
    resumed = await api.post(
        f"/v1/sessions/{sid}/turns/{turn_id}/tool-results",
        params={"wait": "true"},
        json={"results": [ok("call-1", SECRETS["tool output"])]},
        headers={"X-Request-ID": "results-req-2"},
    )
    assert resumed.json()["status"] == "completed", resumed.text

    accepted = lines.one("turn_accepted", turn_id=turn_id)
    assert accepted["session_id"] == sid
    assert accepted["request_id"] == "start-req-1"
    assert accepted["model_id"] == model_id
    assert (accepted["status"], accepted["input_items"]) == ("running", 1)

    first, second = lines.events("model_call", turn_id=turn_id)
    # The first call belongs to the request that started the turn, the second to the one that
    # delivered the tool result (its runner continued the turn).
    assert (first["request_id"], second["request_id"]) == ("start-req-1", "results-req-2")
    assert first["session_id"] == second["session_id"] == sid
    for line, (tokens_in, tokens_out, cached, finish) in zip(
        (first, second), [(120, 15, 100, "tool_calls"), (160, 7, 0, "stop")], strict=True
    ):
        assert line["message"] == "model call"
        assert line["level"] == "INFO"
        assert line["model_id"] == model_id
        assert line["provider_kind"] == "openai_chat"
        assert line["request_model"] == "openai_chat-fake"
        assert line["purpose"] == "turn"
        assert (line["attempts"], line["retried"], line["error_class"]) == (1, [], None)
        assert line["input_tokens"] == tokens_in
        assert line["output_tokens"] == tokens_out
        assert line["cached_tokens"] == cached
        assert line["finish_reason"] == finish
        assert 0 < line["first_byte_ms"] <= line["duration_ms"]
    assert (first["tool_calls"], second["tool_calls"]) == (1, 0)

    finished = lines.one("turn_finished", turn_id=turn_id)
    assert finished["request_id"] == "results-req-2"
    assert finished["session_id"] == sid
    assert (finished["status"], finished["code"], finished["level"]) == ("completed", None, "INFO")
    assert finished["model_calls"] == 2
    assert (finished["input_tokens"], finished["output_tokens"]) == (280, 22)
    assert finished["cached_tokens"] == 100
    assert finished["duration_ms"] > 0

    access = [line for line in lines.events("request") if line.get("turn_id") == turn_id]
    assert [a["route"] for a in access] == [
        "/v1/sessions/{session_id}/turns/{turn_id}/tool-results"
    ]
    assert access[0]["status"] == 200
    assert access[0]["request_id"] == "results-req-2"

    assert lines.text  # something was logged at all, at DEBUG
    leaked = {name: secret for name, secret in SECRETS.items() if secret in lines.text}
    assert not leaked, f"content in the logs: {leaked}"


async def test_a_turn_failed_by_the_provider_logs_the_error_class_and_the_outcome_code(
    served: Served, provider: FakeProviderServer, lines: Lines
) -> None:
    api = served.api
    secret = "provider-error-secret-4410"  # a provider's error message may quote the input
    provider.enqueue(openai_error(400, f"bad request: {secret}"))
    model_id = await provider_model(api, provider)
    sid = await new_session(api, model_id=model_id, agent=agent())
    response = await api.post(
        f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=start("hello")
    )
    turn = response.json()
    assert (turn["status"], turn["outcome"]["code"]) == ("failed", "model_error")

    call = lines.one("model_call", turn_id=turn["turn_id"])
    assert call["message"] == "model call failed"
    assert call["level"] == "WARNING"
    assert (call["error_class"], call["http_status"]) == ("bad_request", 400)
    assert call["semantic_output_received"] is False
    assert call["session_id"] == sid
    finished = lines.one("turn_finished", turn_id=turn["turn_id"])
    assert (finished["status"], finished["code"]) == ("failed", "model_error")
    assert finished["level"] == "WARNING"
    assert finished["model_calls"] == 1
    assert secret not in lines.text


async def test_a_retried_attempt_is_on_the_model_call_line(
    served: Served, provider: FakeProviderServer, lines: Lines
) -> None:
    api = served.api
    provider.enqueue(
        openai_error(429, "slow down", type="rate_limit_error", headers={"retry-after-ms": "1"}),
        StreamReply(openai_stream(text=["fine"], usage=openai_usage(10, 1))),
    )
    model_id = await provider_model(api, provider)
    sid = await new_session(api, model_id=model_id, agent=agent())
    turn = (
        await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=start("hi"))
    ).json()
    assert turn["status"] == "completed"
    call = lines.one("model_call", turn_id=turn["turn_id"])
    assert (call["attempts"], call["retried"], call["error_class"]) == (2, ["rate_limited"], None)


async def test_a_failed_in_turn_compaction_is_logged_with_its_trigger_turn(
    served: Served, lines: Lines
) -> None:
    api = served.api
    small = {"context_window_tokens": 4000, "max_output_tokens": 500}
    model_id = await scripted_model(api, [{"text": "never used"}], **small)
    summary_id = await scripted_model(api, [{"error": "server_error"}] * 3)
    sid = await new_session(
        api, model_id=model_id, summary_model_id=summary_id, agent={"system_prompt": "Be brief."}
    )
    filler = [user(f"request {i}: " + "x" * 1000) for i in range(8)]
    assert (await append(api, sid, *filler)).status_code == 201  # over the line: compaction
    turn = (
        await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=start("go"))
    ).json()
    assert (turn["status"], turn["outcome"]["code"]) == ("failed", "compaction_error")

    compaction = lines.one("compaction", trigger_turn_id=turn["turn_id"])
    assert compaction["message"] == "compaction failed"
    assert compaction["level"] == "WARNING"
    assert compaction["session_id"] == sid
    assert compaction["kind"] == "threshold"
    assert (compaction["outcome"], compaction["code"]) == ("failed", "summary_retries_exhausted")
    assert compaction["attempts"] == 3
    assert compaction["conversation_tokens_before"] > 8 * 1000 // 4  # the filler, at least
    assert compaction["conversation_tokens_after"] is None
    assert compaction["duration_ms"] >= 0
    summaries = lines.events("model_call", turn_id=turn["turn_id"], purpose="summary")
    assert [s["error_class"] for s in summaries] == ["server_error"] * 3
    finished = lines.one("turn_finished", turn_id=turn["turn_id"])
    assert finished["code"] == "compaction_error"
    assert "x" * 50 not in lines.text


async def test_a_compaction_that_would_not_shrink_is_logged_as_not_installed(
    served: Served, lines: Lines
) -> None:
    # The reserved output alone crosses the line, so a short history triggers a threshold
    # compaction whose summary would be longer than the history: not installed, the turn goes on.
    api = served.api
    small = {
        "context_window_tokens": 3000,
        "max_output_tokens": 1500,
        "output_reserve_tokens": 1500,
    }
    model_id = await scripted_model(api, [{"text": "Recovered."}], **small)
    sid = await new_session(
        api, model_id=model_id, summary_model_id="local", agent={"system_prompt": "Be brief."}
    )
    assert (await append(api, sid, user("Is the service up?"))).status_code == 201
    turn = (
        await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=start("go"))
    ).json()
    assert turn["status"] == "completed", turn

    line = lines.one("compaction", trigger_turn_id=turn["turn_id"])
    assert (line["level"], line["message"]) == ("INFO", "compaction not installed")
    assert (line["outcome"], line["code"]) == ("not_installed", "compaction_not_smaller")
    assert line["conversation_tokens_after"] >= line["conversation_tokens_before"] > 0
    assert not lines.events("compaction", message="compaction failed")


async def test_a_completed_manual_compaction_logs_its_figures(served: Served, lines: Lines) -> None:
    api = served.api
    sid = await new_session(api, summary_model_id="local")
    conversation = [user(f"step {i}: " + "words " * 200) for i in range(4)]
    assert (await append(api, sid, *conversation)).status_code == 201
    response = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert response.status_code == 201, response.text
    checkpoint = response.json()

    line = lines.one("compaction", compaction_id=checkpoint["compaction_id"])
    assert line["message"] == "compaction"
    assert line["session_id"] == sid
    assert (line["kind"], line["outcome"], line["code"]) == ("manual", "completed", None)
    assert line["trigger_turn_id"] is None
    assert line["attempts"] == checkpoint["attempts"] == 1
    assert line["conversation_tokens_before"] == checkpoint["conversation_tokens_before"]
    assert line["conversation_tokens_after"] == checkpoint["conversation_tokens_after"]
    assert "words words" not in lines.text


async def test_refused_requests_are_logged_with_their_problem_code(
    served: Served, lines: Lines
) -> None:
    api = served.api
    missing = await api.get("/v1/sessions/no-such-session", headers={"X-Request-ID": "r-404"})
    assert missing.status_code == 404
    sid = await new_session(api)
    invalid = await append(api, sid, {"role": "system", "content": []})
    assert invalid.status_code == 422

    refused = lines.one("request", request_id="r-404")
    assert refused["message"] == "request refused"
    assert (refused["status"], refused["code"]) == (404, "session_not_found")
    assert refused["route"] == "/v1/sessions/{session_id}"
    assert refused["session_id"] == "no-such-session"
    (schema,) = [line for line in lines.events("request") if line["status"] == 422]
    assert schema["code"] == invalid.json()["code"]
    assert schema["session_id"] == sid
    failing = await scripted_model(api, [{"error": "server_error"}] * 3)
    patched = await api.patch(f"/v1/sessions/{sid}", json={"summary_model_id": failing})
    assert patched.status_code == 200, patched.text
    assert (await append(api, sid, user("please summarize me"))).status_code == 201
    upstream = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert upstream.status_code == 502
    (failed,) = [line for line in lines.events("request") if line["status"] == 502]
    assert (failed["message"], failed["level"]) == ("request failed", "WARNING")
    assert failed["code"] == "summary_retries_exhausted"
    assert failed["route"] == "/v1/sessions/{session_id}/compactions"
    ok_line = lines.events("request", route="/v1/sessions", status=201)
    assert ok_line
    assert ok_line[0]["message"] == "request"
    assert "code" not in ok_line[0]


async def test_turns_ended_outside_a_runner_are_logged_too(served: Served, lines: Lines) -> None:
    """A cancel while the turn waits for the caller, and a turn whose runner died (its lease
    expired): both end without a runner, and both have their line and their count."""
    api = served.api
    model_id = await scripted_model(api, [{"tool_calls": [call("read", path="a")]}])
    waiting_sid = await new_session(api, model_id=model_id, agent=agent())
    waiting = (
        await api.post(
            f"/v1/sessions/{waiting_sid}/turns", params={"wait": "true"}, json=start("go")
        )
    ).json()
    assert waiting["phase"] == "waiting_tool_results"
    cancelled = await api.post(
        f"/v1/sessions/{waiting_sid}/turns/{waiting['turn_id']}/cancel",
        headers={"X-Request-ID": "cancel-1"},
    )
    assert cancelled.json()["status"] == "cancelled"

    # A turn left running by a process that died: its lease ran out a minute ago.
    dead_sid = await new_session(api, agent=agent())
    container = served.app.state.container
    async with unit_of_work(container.db) as db:
        await TurnRepository(db).create_running(
            session_id=dead_sid,
            turn_id="turn-dead",
            client_request_id="d",
            input=[],
            phase="running_model",
            model_call_index=1,
            lease_owner="gone:1",
            lease_expires_at=utc_now() - timedelta(minutes=1),
        )
    read = await api.get(f"/v1/sessions/{dead_sid}/turns/turn-dead")  # reaps it first
    assert read.json()["status"] == "interrupted"

    by_cancel = lines.one("turn_finished", turn_id=waiting["turn_id"])
    assert (by_cancel["status"], by_cancel["code"], by_cancel["level"]) == (
        "cancelled",
        None,
        "INFO",
    )
    assert by_cancel["request_id"] == "cancel-1"
    assert by_cancel["model_calls"] == 1
    by_reaper = lines.one("turn_finished", turn_id="turn-dead")
    assert (by_reaper["status"], by_reaper["code"]) == ("interrupted", "process_restart")
    assert (by_reaper["level"], by_reaper["session_id"]) == ("WARNING", dead_sid)
    assert by_reaper["duration_ms"] > 0
    metrics = samples((await api.get("/metrics")).text)
    assert value(metrics, "ctxsvc_turns_finished_total", status="cancelled", code="none") == 1
    assert (
        value(metrics, "ctxsvc_turns_finished_total", status="interrupted", code="process_restart")
        == 1
    )
