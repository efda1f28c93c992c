"""Traces through the SDK's in-memory exporter: a turn with one caller tool round trip on each
provider protocol is one trace (HTTP request → turn legs → model calls → provider HTTP, with
prepare, World State and database spans), linked to the request that resumed it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from app.storage.database import unit_of_work
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import append, new_session, scripted_model, user
from tests.api.test_turns import agent, ok, post_results
from tests.observability.conftest import Served, provider_model, serve
from tests.providers.fakes import (
    FakeProviderServer,
    FakeToolCall,
    FakeToolUse,
    Reply,
    StreamReply,
    anthropic_stream,
    openai_stream,
    openai_usage,
)
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio


@pytest.fixture
async def traced(database_url: str) -> AsyncIterator[Served]:
    async for s in serve(
        database_url,
        traced=True,
        summary_retry_delay_seconds=0.0,
        summary_attempt_timeout_seconds=5.0,
    ):
        yield s


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    span_id = parent.context.span_id
    return [s for s in spans if s.parent is not None and s.parent.span_id == span_id]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# Per protocol: the two replies (a tool call, then the answer), the provider name the GenAI
# conventions give it, and the usage each reply reports.
PROTOCOLS: dict[str, tuple[list[Reply], str, list[tuple[int, int]]]] = {
    "openai_chat": (
        [
            StreamReply(
                openai_stream(
                    tool_calls=[FakeToolCall("call-1", "read", ['{"path": "a.py"}'])],
                    finish_reason="tool_calls",
                    usage=openai_usage(120, 15),
                )
            ),
            StreamReply(openai_stream(text=["Done."], usage=openai_usage(170, 4))),
        ],
        "openai",
        [(120, 15), (170, 4)],
    ),
    "anthropic_messages": (
        [
            StreamReply(
                anthropic_stream(
                    tool_uses=[FakeToolUse("call-1", "read", ['{"path": "a.py"}'])],
                    stop_reason="tool_use",
                    input_tokens=130,
                    output_tokens=16,
                )
            ),
            StreamReply(anthropic_stream(text=["Done."], input_tokens=180, output_tokens=5)),
        ],
        "anthropic",
        [(130, 16), (180, 5)],
    ),
}


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_a_turn_with_a_tool_round_trip_is_one_linked_trace(
    traced: Served, provider: FakeProviderServer, protocol: str
) -> None:
    replies, provider_name, usages = PROTOCOLS[protocol]
    api = traced.api
    provider.enqueue(*replies)
    model_id = await provider_model(api, provider, protocol)
    sid = await new_session(api, model_id=model_id, agent=agent())
    started = await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": "t1", "input": [{"type": "text", "text": "read a.py"}]},
    )
    turn_id = started.json()["turn_id"]
    assert started.json()["phase"] == "waiting_tool_results", started.text
    done = await post_results(api, sid, turn_id, ok("call-1"), wait=True)
    assert done.json()["status"] == "completed", done.text

    spans = traced.spans()
    (start_request,) = named(spans, "POST /v1/sessions/{session_id}/turns")
    (results_request,) = named(spans, "POST /v1/sessions/{session_id}/turns/{turn_id}/tool-results")
    assert start_request.kind is SpanKind.SERVER
    trace_id = start_request.context.trace_id

    # Two legs of one turn, both in the trace of the request that started it; the second was
    # resumed by the tool-results request (another trace: the caller sent no traceparent),
    # which it links to.
    first, second = named(spans, "turn")
    for leg in (first, second):
        assert leg.context.trace_id == trace_id
        assert parent_of(leg) == start_request.context.span_id
        assert attrs(leg)["ctxsvc.session_id"] == sid
        assert attrs(leg)["ctxsvc.turn_id"] == turn_id
        assert attrs(leg)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(first)["ctxsvc.turn.resumed"] is False
    assert attrs(first)["ctxsvc.turn.phase"] == "waiting_tool_results"
    assert attrs(second)["ctxsvc.turn.resumed"] is True
    assert attrs(second)["ctxsvc.turn.status"] == "completed"
    assert attrs(second)["ctxsvc.turn.model_calls"] == 2
    assert [link.context.span_id for link in second.links] == [results_request.context.span_id]
    assert results_request.context.trace_id != trace_id
    # What the second leg's replica found on the turn row: the starting request's context.
    async with unit_of_work(traced.app.state.container.db, read_only=True) as db:
        row = await TurnRepository(db).get(sid, turn_id)
    assert row is not None
    assert row.trace_context is not None
    version, stored_trace, stored_parent, _flags = row.trace_context.split("-")
    assert (version, stored_trace) == ("00", f"{trace_id:032x}")
    assert stored_parent == f"{start_request.context.span_id:016x}"

    # One model call per leg, each a client span with the GenAI attributes and the provider's
    # HTTP request as its child (whose traceparent the provider received).
    calls = named(spans, f"chat {protocol}-fake")
    assert len(calls) == 2
    for leg, chat, (tokens_in, tokens_out), finish in zip(
        (first, second), calls, usages, ("tool_calls", "stop"), strict=True
    ):
        assert parent_of(chat) == leg.context.span_id
        assert chat.kind is SpanKind.CLIENT
        a = attrs(chat)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == provider_name
        assert a["gen_ai.request.model"] == f"{protocol}-fake"
        assert a["gen_ai.request.max_tokens"] == 1000
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
            tokens_in,
            tokens_out,
        )
        assert a["gen_ai.response.finish_reasons"] == (finish,)
        assert (a["ctxsvc.session_id"], a["ctxsvc.turn_id"]) == (sid, turn_id)
        assert a["ctxsvc.model_id"] == model_id
        (http,) = children(spans, chat)
        assert http.kind is SpanKind.CLIENT
        assert http.name == "POST"
        assert attrs(http)["http.status_code"] == 200
        assert str(attrs(http)["http.url"]).startswith(provider.base_url)
    for request, chat in zip(provider.requests, calls, strict=True):
        assert request.headers["traceparent"].split("-")[1] == format(trace_id, "032x")
        assert request.headers["traceparent"].split("-")[2] != format(chat.context.span_id, "016x")

    # Each leg prepared its request (with the budget figures), sampled World State and talked
    # to the database: all inside the turn's trace.
    in_turn = [s for s in spans if s.context.trace_id == trace_id]
    prepares = named(in_turn, "prepare")
    assert len(prepares) == 2
    for prepare in prepares:
        a = attrs(prepare)
        assert a["ctxsvc.prepare.kind"] == "turn"
        assert (
            0
            < a["ctxsvc.budget.estimated_input_tokens"]
            < a["ctxsvc.budget.effective_input_tokens"]
        )
        assert a["ctxsvc.budget.context_window_tokens"] == 100_000
    assert len(named(in_turn, "world_state.write")) == 2
    database = [s for s in in_turn if "db.system.name" in attrs(s) or "db.system" in attrs(s)]
    legs = {first.context.span_id, second.context.span_id}
    assert {parent_of(s) for s in database} & legs
    statements = " ".join(
        str(attrs(s).get("db.statement", attrs(s).get("db.query.text"))) for s in database
    )
    assert "INSERT INTO messages" in statements
    assert "read a.py" not in statements  # statements, never their parameters
    # A step's deferred writes go out together: one span says how many statements it sent.
    batches = [s for s in database if s.name.startswith("BATCH")]
    assert batches
    assert max(attrs(s)["db.operation.batch.size"] for s in batches) >= 2
    assert not [s for s in in_turn if s.status.status_code is StatusCode.ERROR]


async def test_an_in_turn_compaction_is_a_span_of_the_turn_with_its_summary_call(
    traced: Served,
) -> None:
    api = traced.api
    small = {"context_window_tokens": 4000, "max_output_tokens": 500}
    model_id = await scripted_model(api, [{"text": "done"}], **small)
    summarizer = await scripted_model(api, [{"text": VALID}])
    sid = await new_session(
        api, model_id=model_id, summary_model_id=summarizer, agent={"system_prompt": "Be brief."}
    )
    assert (await append(api, sid, *[user("x " * 600) for _ in range(8)])).status_code == 201
    turn = (
        await api.post(
            f"/v1/sessions/{sid}/turns",
            params={"wait": "true"},
            json={"client_request_id": "c", "input": [{"type": "text", "text": "go"}]},
        )
    ).json()
    assert turn["status"] == "completed", turn

    spans = traced.spans()
    (leg,) = named(spans, "turn")
    (compaction,) = named(spans, "compaction threshold")
    assert parent_of(compaction) == leg.context.span_id
    a = attrs(compaction)
    assert (a["ctxsvc.session_id"], a["ctxsvc.turn_id"]) == (sid, turn["turn_id"])
    assert a["ctxsvc.compaction.outcome"] == "completed"
    assert (
        a["ctxsvc.compaction.conversation_tokens_before"]
        > a["ctxsvc.compaction.conversation_tokens_after"]
    )
    (summary,) = [s for s in children(spans, compaction) if s.name == f"chat {summarizer}"]
    assert attrs(summary)["ctxsvc.model_call.purpose"] == "summary"
    assert attrs(summary)["gen_ai.provider.name"] == "ctxsvc.scripted"
    (answer,) = [s for s in children(spans, leg) if s.name == f"chat {model_id}"]
    assert attrs(answer)["gen_ai.provider.name"] == "ctxsvc.scripted"


async def test_a_failed_model_call_marks_its_span_with_the_error_class(traced: Served) -> None:
    api = traced.api
    model_id = await scripted_model(api, [{"error": "rate_limited"}])
    sid = await new_session(api, model_id=model_id, agent=agent())
    turn = (
        await api.post(
            f"/v1/sessions/{sid}/turns",
            params={"wait": "true"},
            json={"client_request_id": "f", "input": [{"type": "text", "text": "go"}]},
        )
    ).json()
    assert turn["outcome"]["code"] == "model_error"
    spans = traced.spans()
    (chat,) = named(spans, f"chat {model_id}")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "rate_limited"
    (leg,) = named(spans, "turn")
    assert attrs(leg)["ctxsvc.turn.status"] == "failed"
    assert attrs(leg)["ctxsvc.turn.outcome_code"] == "model_error"


async def test_probes_and_scrapes_are_not_traced(traced: Served) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/v1/sessions"):
        assert (await traced.api.get(path)).status_code == 200
    servers = [s for s in traced.spans() if s.kind is SpanKind.SERVER]
    assert [s.name for s in servers] == ["GET /v1/sessions"]
