"""Turns with a model of kind ``openai_responses``, end to end over real HTTP: the loopback fake
answers in the Responses protocol, streamed or as one JSON object, through several tool rounds;
reasoning items go back verbatim on the next call; the usage the provider reported (cached and
reasoning tokens) is the turn's."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session, run_turn, user
from tests.api.test_turns import agent, history, ok, post_results
from tests.providers.encoding.sdk_types import assert_responses_body
from tests.providers.fake_responses import (
    FakeFunctionCall,
    FakeReasoning,
    responses_object,
    responses_output,
    responses_stream,
    responses_usage,
)
from tests.providers.fakes import BodyReply, FakeProviderServer, Reply, StreamReply

pytestmark = pytest.mark.anyio


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    with FakeProviderServer() as server:
        yield server


async def responses_model(
    api: httpx.AsyncClient, server: FakeProviderServer, *, reasoning: bool = True
) -> str:
    model_id = f"responses-{uuid.uuid4().hex[:8]}"
    body = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "reasoning": reasoning,
        "provider": {
            "kind": "openai_responses",
            "base_url": server.base_url + "/v1",
            "model_name": "gpt-fake",
            "api_key_env": "CTXSVC_TEST_FAKE_KEY",
        },
    }
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["provider"]["kind"] == "openai_responses"
    assert response.json()["reasoning"] is reasoning
    return model_id


def answer(streaming: bool, usage: dict[str, Any], **parts: Any) -> Reply:
    if streaming:
        return StreamReply(responses_stream(usage=usage, **parts))
    return BodyReply(responses_object(responses_output(**parts), usage=usage))


def read(call_id: str, path: str) -> FakeFunctionCall:
    return FakeFunctionCall(call_id, "read", [f'{{"path": "{path}"}}'])


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
async def test_a_turn_over_several_tool_rounds(
    api: httpx.AsyncClient, provider: FakeProviderServer, streaming: bool
) -> None:
    thought = FakeReasoning("rs_1", ["Look at a.py first."], encrypted_content="enc-1")
    provider.enqueue(
        answer(
            streaming,
            responses_usage(900, 30, reasoning=12),
            reasoning=[thought],
            function_calls=[read("call_1", "a.py")],
        ),
        answer(
            streaming,
            responses_usage(1100, 20, cached=896),
            text=["Now b.py."],
            function_calls=[read("call_2", "b.py")],
        ),
        answer(streaming, responses_usage(1300, 10, cached=1024), text=["Both ", "read."]),
    )
    sid = await new_session(api, model_id=await responses_model(api, provider), agent=agent())
    turn = await run_turn(api, sid, "read a.py and b.py")
    assert [c["tool_call_id"] for c in turn["pending_tool_calls"]] == ["call_1"]
    turn = (await post_results(api, sid, turn["turn_id"], ok("call_1", "A"), wait=True)).json()
    assert [c["tool_call_id"] for c in turn["pending_tool_calls"]] == ["call_2"]
    done = (await post_results(api, sid, turn["turn_id"], ok("call_2", "B"), wait=True)).json()

    assert done["status"] == "completed", done["outcome"]
    assert done["outcome"] == {"final_text": "Both read."}
    assert done["model_calls"] == 3
    usage = done["usage"]
    assert (usage["input_tokens"], usage["cached_tokens"], usage["reasoning_tokens"]) == (
        3300,
        1920,
        12,
    )

    bodies = [r.json() for r in provider.requests]
    assert [(r.method, r.path) for r in provider.requests] == [("POST", "/v1/responses")] * 3
    for body in bodies:
        assert_responses_body(body)
        assert body["store"] is False
        assert body["prompt_cache_key"] == bodies[0]["prompt_cache_key"]  # one per session
    # Each call's input starts with the previous one's, byte for byte.
    for before, after in itertools.pairwise(bodies):
        assert after["input"][: len(before["input"])] == before["input"]
    # The reasoning item of the first answer went back exactly as it came.
    last = bodies[2]["input"]
    reasoning = [i for i in last if i.get("type") == "reasoning"]
    assert reasoning == [responses_output(reasoning=[thought])[0]]
    outputs = [(i["call_id"], i["output"]) for i in last if i["type"] == "function_call_output"]
    assert outputs == [("call_1", "A"), ("call_2", "B")]

    stored = await history(api, sid)
    assert [m["role"] for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    first_answer = stored[1]["content"]
    assert [b["type"] for b in first_answer] == ["thinking", "provider_opaque", "tool_call"]
    assert first_answer[0]["thinking"] == "Look at a.py first."


async def test_the_context_of_a_responses_session_encodes_as_responses(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    provider.enqueue(StreamReply(responses_stream(text=["Hi."], usage=responses_usage(50, 2))))
    sid = await new_session(api, model_id=await responses_model(api, provider), agent=agent())
    assert (await run_turn(api, sid, "hello"))["status"] == "completed"
    context = await api.get(f"/v1/sessions/{sid}/context", params={"encode": "openai_responses"})
    assert context.status_code == 200, context.text
    payload = context.json()["provider_payload"]
    assert_responses_body(payload)
    assert payload["model"] == "gpt-fake"
    said = [i for i in payload["input"] if i.get("role") == "assistant"]
    assert said == [{"type": "message", "role": "assistant", "content": "Hi."}]


@pytest.mark.parametrize("reasoning", [True, False], ids=["reasons", "does-not-reason"])
async def test_the_reasoning_state_is_asked_for_only_of_a_model_that_reasons(
    api: httpx.AsyncClient, provider: FakeProviderServer, reasoning: bool
) -> None:
    # OpenAI refuses the ``include`` for gpt-4o, gpt-4.1 or gpt-5-chat (HTTP 400 "Encrypted
    # content is not supported with this model"): a model registered as not reasoning never
    # sends it, and the preview of the context says exactly what its calls send.
    provider.enqueue(
        StreamReply(responses_stream(text=["Hi."], usage=responses_usage(50, 2))),
        StreamReply(responses_stream(text=["Again."], usage=responses_usage(60, 2))),
    )
    model_id = await responses_model(api, provider, reasoning=reasoning)
    sid = await new_session(api, model_id=model_id, agent=agent())
    assert (await run_turn(api, sid, "hello"))["status"] == "completed"
    context = await api.get(f"/v1/sessions/{sid}/context", params={"encode": "openai_responses"})
    assert context.status_code == 200, context.text
    preview = context.json()["provider_payload"]
    assert (await run_turn(api, sid, "hello again"))["status"] == "completed"

    first, second = (r.json() for r in provider.requests)
    for body in (first, second, preview):
        assert ("include" in body) is reasoning
        assert_responses_body(body)
    if reasoning:
        assert first["include"] == ["reasoning.encrypted_content"]
    # The next call is the preview plus the new message, streamed: every other field is equal.
    assert second["input"][: len(preview["input"])] == preview["input"]
    assert {k: v for k, v in second.items() if k not in ("input", "stream")} == {
        k: v for k, v in preview.items() if k != "input"
    }


@pytest.mark.parametrize(
    ("model_id", "reasons"),
    [("gpt-4o", False), ("gpt-4.1", False), ("o3", True), ("gpt-5", True), ("o3-pro", True)],
)
async def test_a_catalogue_model_encodes_with_its_own_reasoning(
    stateless_client: httpx.AsyncClient, model_id: str, reasons: bool
) -> None:
    response = await stateless_client.post(
        "/v1/prepare",
        json={"conversation": [user("hi")], "model_id": model_id},
        params={"encode": "openai_responses"},
    )
    assert response.status_code == 200, response.text
    payload = response.json()["provider_payload"]
    assert ("include" in payload) is reasons
    assert_responses_body(payload)
    listed = (await stateless_client.get(f"/v1/models/{model_id}")).json()
    assert listed["reasoning"] is reasons
