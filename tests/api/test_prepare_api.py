"""``POST /v1/prepare`` through HTTP: spec §3.2's worked numbers, caps, pruning, bad input."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def user(t: str, seq: int | None = None) -> dict[str, Any]:
    origin: dict[str, Any] = {"type": "real"}
    if seq is not None:
        origin.update(message_id=f"m{seq}", sequence=seq)
    return {"role": "user", "content": text(t), "origin": origin}


def body(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "system_context": [
            {"key": "agent", "content": text("agent")},
            {"key": "project", "content": text("project")},
        ],
        "conversation": [user("x" * 1600, 1)],
        "model": {"context_window_tokens": 1000, "max_output_tokens": 400},
    }
    base.update(overrides)
    return base


async def prepare(client: httpx.AsyncClient, payload: dict[str, Any]) -> httpx.Response:
    return await client.post("/v1/prepare", json=payload)


async def test_the_1000_400_example_measures_424_and_triggers(
    stateless_client: httpx.AsyncClient,
) -> None:
    response = await prepare(stateless_client, body())
    assert response.status_code == 200, response.text
    budget = response.json()["budget"]
    assert budget["system_context_tokens"] == 17
    assert budget["conversation_tokens"] == 407
    assert budget["estimated_input_tokens"] == 424
    assert budget["effective_input_tokens"] == 600
    assert budget["auto_compact_token_limit"] == 510
    assert budget["reaches_auto_compact_limit"] is True
    assert budget["counter"] == "estimate"


async def test_the_200k_window_with_32k_output(stateless_client: httpx.AsyncClient) -> None:
    payload = body(model={"context_window_tokens": 200_000, "max_output_tokens": 32_000})
    budget = (await prepare(stateless_client, payload)).json()["budget"]
    assert (budget["effective_input_tokens"], budget["auto_compact_token_limit"]) == (
        168_000,
        142_800,
    )
    assert budget["reaches_auto_compact_limit"] is False


@pytest.mark.parametrize(("chars", "triggers"), [(345, True), (341, False)])
async def test_equality_triggers_and_one_token_under_does_not(
    stateless_client: httpx.AsyncClient, chars: int, triggers: bool
) -> None:
    # 17 system tokens + ceil((27 + chars) / 4) conversation tokens + 400 reserved vs. 510.
    response = await prepare(stateless_client, body(conversation=[user("y" * chars)]))
    budget = response.json()["budget"]
    assert budget["estimated_input_tokens"] + budget["reserved_output_tokens"] == (
        510 if triggers else 509
    )
    assert budget["reaches_auto_compact_limit"] is triggers


async def test_keel_budget_plan(stateless_client: httpx.AsyncClient) -> None:
    # A 37-char system text is 64 JSON bytes (16 tokens); the tool array below is 58 bytes (15).
    tool: dict[str, Any] = {"name": "grep", "description": "search", "input_schema": {}}
    assert len(json.dumps([tool], separators=(",", ":"))) == 58
    payload = body(
        system_context=[{"key": "core/agent-system", "content": text("s" * 37)}],
        conversation=[user("hi")],
        tools=[tool],
        model={"context_window_tokens": 220, "max_output_tokens": 50, "safety_margin_tokens": 12},
    )
    budget = (await prepare(stateless_client, payload)).json()["budget"]
    assert budget["system_context_tokens"] == 16
    assert budget["tool_surface_tokens"] == 15
    assert budget["input_budget"] == 158
    assert budget["dynamic_budget"] == 127
    assert budget["dynamic_budget_exhausted"] is False


async def test_negative_dynamic_budget_is_reported(stateless_client: httpx.AsyncClient) -> None:
    payload = body(
        system_context=[{"key": "core/agent-system", "content": text("s" * 2000)}],
        conversation=[user("hi")],
        model={"context_window_tokens": 500, "max_output_tokens": 50},
    )
    budget = (await prepare(stateless_client, payload)).json()["budget"]
    assert budget["dynamic_budget"] < 0
    assert budget["dynamic_budget_exhausted"] is True


async def test_a_17000_char_old_tool_result_is_pruned(stateless_client: httpx.AsyncClient) -> None:
    payload = body(
        conversation=[
            user("run it", 1),
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "call/1", "name": "bash", "input": "{}"}],
                "origin": {"type": "real", "message_id": "m2", "sequence": 2},
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "id": "call/1",
                        "name": "bash",
                        "output": text("z" * 17_000),
                        "state": "success",
                    }
                ],
                "origin": {"type": "real", "message_id": "m3", "sequence": 3},
            },
        ],
        model={"context_window_tokens": 200_000, "max_output_tokens": 32_000},
        tool_result_pruning={"through_sequence": 3, "spill_directory": "/spill"},
    )
    response = await prepare(stateless_client, payload)
    assert response.status_code == 200, response.text
    result = response.json()["request"]["messages"][-1]["content"][0]
    assert (
        "... [tool result pruned: 11880 characters omitted. Full result at "
        "/spill/call_1.c5fb05e4d7a4906f.txt — read it if you still need it]"
        in result["output"][0]["text"]
    )
    assert response.json()["projection"]["pruned_tool_results"] == 1


@pytest.mark.parametrize(("chars", "status"), [(39_969, 200), (39_973, 422)])
async def test_system_part_cap_rejects_at_equality(
    stateless_client: httpx.AsyncClient, chars: int, status: int
) -> None:
    # ceil((27 + 39 969) / 4) = 9 999 tokens (accepted); 39 973 chars → exactly 10 000 (refused).
    payload = body(
        system_context=[{"key": "core/agent-system", "content": text("s" * chars)}],
        model={"context_window_tokens": 200_000, "max_output_tokens": 32_000},
    )
    response = await prepare(stateless_client, payload)
    assert response.status_code == status, response.text
    if status == 422:
        problem = response.json()
        assert problem["code"] == "system_context_part_too_large"
        assert "core/agent-system" in problem["detail"]
        assert "10000" in problem["detail"]


async def test_encode_produces_the_provider_payload(stateless_client: httpx.AsyncClient) -> None:
    response = await prepare(stateless_client, body(encode="anthropic_messages"))
    payload = response.json()["provider_payload"]
    assert payload["system"][0]["text"] == "agent"
    assert payload["messages"][0]["role"] == "user"
    query = await stateless_client.post("/v1/prepare?encode=openai_chat", json=body())
    assert query.json()["provider_payload"]["messages"][0] == {"role": "system", "content": "agent"}


async def test_a_catalogue_model_id_can_replace_capabilities(
    stateless_client: httpx.AsyncClient,
) -> None:
    payload = body(model=None, model_id="claude-haiku-4-5")
    del payload["model"]
    budget = (await prepare(stateless_client, payload)).json()["budget"]
    assert budget["context_window_tokens"] == 200_000
    # 64 000 of output at most; the default reserve keeps 32 768 of the window for it.
    assert budget["reserved_output_tokens"] == 32_768
    assert budget["effective_input_tokens"] == 200_000 - 32_768


@pytest.mark.parametrize(
    ("mutate", "status", "code"),
    [
        (
            lambda b: b["conversation"].append({"role": "system", "content": text("x")}),
            422,
            "system_message_in_conversation",
        ),
        (
            lambda b: b["conversation"].append({"role": "robot", "content": text("x")}),
            422,
            "invalid_request",
        ),
        (
            lambda b: b["conversation"].append(
                {"role": "user", "kind": "memo", "content": text("x")}
            ),
            422,
            "invalid_request",
        ),
        (
            lambda b: b["conversation"].append({"role": "user", "content": [{"type": "image"}]}),
            422,
            "invalid_request",
        ),
        (
            lambda b: b["system_context"].append({"key": "agent", "content": text("again")}),
            422,
            "duplicate_system_context_key",
        ),
        (
            lambda b: b["system_context"].append({"key": "empty", "content": []}),
            422,
            "empty_system_context_part",
        ),
        (
            lambda b: b["system_context"].append({"key": "  ", "content": text("x")}),
            422,
            "empty_system_context_key",
        ),
        (lambda b: b["model"].update(max_output_tokens=-1), 422, "invalid_request"),
        (
            lambda b: b["model"].update(max_output_tokens=1000, output_reserve_tokens=1000),
            422,
            "invalid_capabilities",
        ),
        (
            lambda b: b["model"].update(safety_margin_tokens=300, fixed_reserve_tokens=300),
            422,
            "invalid_capabilities",
        ),
        (lambda b: b.update(model_id="gpt-5"), 422, "invalid_request"),
        (lambda b: (b.pop("model"), b.update(model_id="no-such-model")), 422, "unknown_model_id"),
        (
            lambda b: (
                b["model"].update(accepts_data_blocks=False)
                or b["conversation"].append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "data",
                                "source": {
                                    "source_type": "url",
                                    "url": "https://x/y.png",
                                    "media_type": "image/png",
                                },
                            }
                        ],
                    }
                )
            ),
            422,
            "data_blocks_not_accepted",
        ),
    ],
)
async def test_bad_input_is_a_specific_problem(
    stateless_client: httpx.AsyncClient, mutate: Any, status: int, code: str
) -> None:
    payload = body()
    mutate(payload)
    response = await prepare(stateless_client, payload)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == code
    assert problem["status"] == status
    assert problem["detail"]


async def test_an_oversized_body_is_refused_with_413(stateless_client: httpx.AsyncClient) -> None:
    payload = body(conversation=[user("x" * 2_100_000)])
    response = await prepare(stateless_client, payload)
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"


async def test_an_oversized_chunked_body_is_refused_with_413(
    stateless_client: httpx.AsyncClient,
) -> None:
    raw = json.dumps(body(conversation=[user("x" * 2_100_000)])).encode()

    async def chunks() -> Any:
        for i in range(0, len(raw), 65_536):
            yield raw[i : i + 65_536]

    response = await stateless_client.post(
        "/v1/prepare", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"


async def test_unknown_route_is_a_problem(stateless_client: httpx.AsyncClient) -> None:
    response = await stateless_client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


async def test_a_system_message_is_named_by_its_index_in_the_callers_conversation(
    stateless_client: httpx.AsyncClient,
) -> None:
    orphan = {
        "role": "tool",
        "content": [{"type": "tool_result", "id": "gone", "name": "read", "output": text("o")}],
    }
    payload = body(conversation=[orphan, user("hi"), {"role": "system", "content": text("x")}])
    problem = (await prepare(stateless_client, payload)).json()
    assert problem["code"] == "system_message_in_conversation"
    assert problem["item_index"] == 2  # the dropped orphan counts, as for data blocks
    assert problem["detail"].startswith("conversation item 2 ")
