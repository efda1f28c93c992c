"""Prompt caching through the API (spec §10): the model setting, the breakpoints an encoded
prepare answer and a turn's model calls carry, and cache usage per model call and per turn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.schemas.prepare import BudgetOut
from app.storage.database import unit_of_work
from app.storage.repositories.state import EventRepository
from tests.api.helpers import fake_provider_model, new_session, prepare_session, run_turn
from tests.api.test_turns import ok, post_results
from tests.providers.encoding.sdk_types import assert_anthropic_body, assert_openai_body
from tests.providers.fakes import (
    FakeProviderServer,
    FakeToolUse,
    StreamReply,
    anthropic_stream,
)

pytestmark = pytest.mark.anyio

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"
# About 1 500 tokens by the estimate: a System Context the provider can cache on its own.
LONG_PROMPT = "You are a careful agent. " * 240
TOOL = {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
MODEL = {"context_window_tokens": 100_000, "max_output_tokens": 1000}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeProviderServer() as server:
        yield server


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def marked(body: dict[str, Any]) -> list[str]:
    """Which parts of an Anthropic body carry ``cache_control``."""
    where = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    where += ["system" for b in body.get("system", []) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        where += [f"message:{i}" for b in message["content"] if "cache_control" in b]
    return where


# ----- the setting ---------------------------------------------------------------------------


async def test_prompt_caching_defaults_to_auto_and_is_stored_as_given(
    api: httpx.AsyncClient,
) -> None:
    provider = {"kind": "local"}
    created = await api.put("/v1/models/pc-default", json={**MODEL, "provider": provider})
    assert created.status_code == 201, created.text
    assert created.json()["prompt_caching"] == "auto"
    off = {**MODEL, "provider": provider, "prompt_caching": "off"}
    assert (await api.put("/v1/models/pc-default", json=off)).json()["prompt_caching"] == "off"
    assert (await api.get("/v1/models/pc-default")).json()["prompt_caching"] == "off"
    # The built-in catalogue caches by default too.
    assert (await api.get("/v1/models/claude-haiku-4-5")).json()["prompt_caching"] == "auto"


async def test_an_unknown_prompt_caching_value_is_refused_and_nothing_stored(
    api: httpx.AsyncClient,
) -> None:
    bad = {**MODEL, "provider": {"kind": "local"}, "prompt_caching": "always"}
    response = await api.put("/v1/models/pc-bad", json=bad)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["code"] == "invalid_request", problem
    assert "prompt_caching" in response.text
    assert (await api.get("/v1/models/pc-bad")).status_code == 404
    inline = {
        "system_context": [],
        "conversation": [{"role": "user", "content": text("q"), "origin": {"type": "real"}}],
        "model": {**MODEL, "prompt_caching": "sometimes"},
    }
    assert (await api.post("/v1/prepare", json=inline)).status_code == 422


# ----- prepare answers ---------------------------------------------------------------------


def stateless(prompt_caching: str, *conversation: str) -> dict[str, Any]:
    return {
        "system_context": [{"key": "agent", "content": text(LONG_PROMPT)}],
        "conversation": [
            {"role": "user", "content": text(t), "origin": {"type": "real"}} for t in conversation
        ],
        "tools": [TOOL],
        "model": {**MODEL, "prompt_caching": prompt_caching, "model_name": "m"},
    }


async def test_the_stateless_anthropic_payload_marks_the_system_and_the_last_message(
    api: httpx.AsyncClient,
) -> None:
    on = await api.post(
        "/v1/prepare", params={"encode": "anthropic_messages"}, json=stateless("auto", "q", "r")
    )
    off = await api.post(
        "/v1/prepare", params={"encode": "anthropic_messages"}, json=stateless("off", "q", "r")
    )
    assert on.status_code == off.status_code == 200, on.text
    payload = on.json()["provider_payload"]
    # The tool definitions alone are far under the minimum: not marked.
    assert marked(payload) == ["system", "message:0"]
    assert_anthropic_body(payload)
    assert marked(off.json()["provider_payload"]) == []
    # The budget counts what is sent: markers change no content.
    assert on.json()["budget"] == off.json()["budget"]
    assert on.json()["request"] == off.json()["request"]


async def test_the_stateless_openai_key_follows_the_agent_not_the_conversation(
    api: httpx.AsyncClient,
) -> None:
    async def key(body: dict[str, Any]) -> Any:
        response = await api.post("/v1/prepare", params={"encode": "openai_chat"}, json=body)
        assert response.status_code == 200, response.text
        assert_openai_body(response.json()["provider_payload"])
        return response.json()["provider_payload"].get("prompt_cache_key")

    first = await key(stateless("auto", "q"))
    assert first is not None
    assert first.startswith("ctxsvc-")
    assert await key(stateless("auto", "q", "a longer conversation")) == first
    other_agent = stateless("auto", "q")
    other_agent["system_context"][0]["content"] = text("Another agent.")
    assert await key(other_agent) != first
    assert await key(stateless("off", "q")) is None


async def test_a_session_prepare_payload_carries_a_key_per_session(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    model = await fake_provider_model(api, provider.base_url, "openai_chat")
    agent = {"system_prompt": LONG_PROMPT, "tools": [TOOL]}
    one = await new_session(api, model_id=model, agent=agent)
    two = await new_session(api, model_id=model, agent=agent)
    keys = []
    for sid in (one, one, two):
        response = await prepare_session(api, sid, encode="openai_chat")
        assert response.status_code == 200, response.text
        keys.append(response.json()["provider_payload"]["prompt_cache_key"])
    assert keys[0] == keys[1] != keys[2]
    assert one not in keys[0]


# ----- a turn's model calls ------------------------------------------------------------------


async def test_each_model_call_reports_its_usage_and_budget_and_the_turn_sums_them(
    app_api: tuple[FastAPI, httpx.AsyncClient], provider: FakeProviderServer
) -> None:
    app, api = app_api
    model = await fake_provider_model(api, provider.base_url, "anthropic_messages", key_env=KEY_ENV)
    sid = await new_session(
        api, model_id=model, agent={"system_prompt": LONG_PROMPT, "tools": [TOOL]}
    )
    provider.enqueue(
        StreamReply(
            anthropic_stream(
                tool_uses=[FakeToolUse("toolu_1", "read", ['{"path": "a"}'])],
                stop_reason="tool_use",
                input_tokens=5,
                cache_creation=1500,
                output_tokens=7,
            )
        ),
        StreamReply(
            anthropic_stream(
                text=["done"], input_tokens=9, cache_read=1500, cache_creation=30, output_tokens=2
            )
        ),
    )
    turn = await run_turn(api, sid)
    (pending,) = turn["pending_tool_calls"]
    finished = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert finished.status_code == 200, finished.text
    turn = finished.json()
    assert turn["status"] == "completed", turn
    assert turn["usage"] == {
        "input_tokens": 1505 + 1539,
        "output_tokens": 9,
        "cached_tokens": 1500,
        "cache_creation_tokens": 1530,
        "reasoning_tokens": 0,
    }
    session = (await api.get(f"/v1/sessions/{sid}")).json()
    assert session["usage"]["cache_creation_tokens"] == 1530
    assert session["usage"]["cached_tokens"] == 1500

    # Both calls carried the breakpoints: the System Context and the moving last block; the
    # second also the first call's last block, which its stable prefix still holds.
    first, second = (r.json() for r in provider.requests)
    assert marked(first) == ["system", "message:0"]
    assert marked(second) == ["system", "message:0", f"message:{len(second['messages']) - 1}"]
    assert_anthropic_body(second)

    async with unit_of_work(app.state.container.db, read_only=True) as db:
        events = await EventRepository(db).list_after(sid)
    calls = [e for e in events if e.type == "model_call_finished"]
    assert [e.turn_id for e in calls] == [turn["turn_id"]] * 2
    one, two = (e.payload for e in calls)
    assert (one["model_call_index"], two["model_call_index"]) == (1, 2)
    assert one["model_id"] == two["model_id"] == model
    assert one["usage"] == {
        "input_tokens": 1505,
        "output_tokens": 7,
        "cached_tokens": 0,
        "cache_creation_tokens": 1500,
        "reasoning_tokens": 0,
    }
    assert two["usage"]["cached_tokens"] == 1500
    # The budget as a prepare answer carries it, of the request each call sent.
    assert set(one["budget"]) == set(BudgetOut.model_fields)
    assert one["budget"]["system_context_tokens"] == two["budget"]["system_context_tokens"]
    assert two["budget"]["conversation_tokens"] > one["budget"]["conversation_tokens"]
    # The update of a call comes before the turn's end.
    types = [e.type for e in events]
    assert types.index("model_call_finished") < types.index("turn_finished")


async def test_calibration_compares_the_whole_input_with_the_whole_estimate(
    app_api: tuple[FastAPI, httpx.AsyncClient], provider: FakeProviderServer
) -> None:
    app, api = app_api
    model = await fake_provider_model(api, provider.base_url, "anthropic_messages", key_env=KEY_ENV)
    sid = await new_session(
        api, model_id=model, agent={"system_prompt": LONG_PROMPT, "tools": [TOOL]}
    )
    # The same prompt twice: first written to the cache, then almost all read from it.
    provider.enqueue(
        StreamReply(anthropic_stream(text=["a"], input_tokens=20, cache_creation=1980)),
        StreamReply(anthropic_stream(text=["b"], input_tokens=20, cache_read=1980)),
    )
    for _ in range(2):
        assert (await run_turn(api, sid))["status"] == "completed"
    async with unit_of_work(app.state.container.db, read_only=True) as db:
        events = await EventRepository(db).list_after(sid)
    budgets = [e.payload["budget"] for e in events if e.type == "model_call_finished"]
    calibration = (await api.get(f"/v1/models/{model}")).json()["calibration"]
    samples = list(reversed(calibration["samples"]))  # oldest first
    # Each sample is the provider's whole input (uncached, written and read) against the
    # estimate of the whole request: a cache hit does not look like an over-estimate.
    assert [s["reported_input_tokens"] for s in samples] == [2000, 2000]
    assert [s["estimated_input_tokens"] for s in samples] == [
        b["estimated_input_tokens"] for b in budgets
    ]
    ratios = [s["ratio"] for s in samples]
    assert abs(ratios[0] - ratios[1]) < 0.05
    assert ratios[1] > 0.5
