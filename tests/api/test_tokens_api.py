"""``POST /v1/tokens/count``: text, content and whole prepare bodies, with each counter."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio

O200K = "tiktoken:o200k_base"
CL100K = "tiktoken:cl100k_base"


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def prepare_body(**overrides: Any) -> dict[str, Any]:
    """spec §3.2's example: window 1000, output 400, "agent" + "project" + 1600 characters."""
    body: dict[str, Any] = {
        "system_context": [
            {"key": "agent", "content": text("agent")},
            {"key": "project", "content": text("project")},
        ],
        "conversation": [{"role": "user", "content": text("x" * 1600)}],
        "tools": [{"name": "read", "description": "Read a file", "input_schema": {}}],
        "model": {"context_window_tokens": 1000, "max_output_tokens": 400},
    }
    body.update(overrides)
    return body


async def count(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post("/v1/tokens/count", json=body)


@pytest.mark.parametrize(
    ("counter", "tokens"),
    [("estimate", 3), (O200K, 2), (CL100K, 2)],  # 11 bytes → ceil(11/4); "hello" + " world"
)
async def test_text_is_counted_without_framing(
    sqlite_api: httpx.AsyncClient, counter: str, tokens: int
) -> None:
    response = await count(sqlite_api, counter=counter, text="hello world")
    assert response.status_code == 200, response.text
    assert response.json() == {"counter": counter, "tokens": tokens}


async def test_the_counter_defaults_to_the_estimate(sqlite_api: httpx.AsyncClient) -> None:
    response = await count(sqlite_api, text="é" * 10)  # 20 UTF-8 bytes
    assert response.json() == {"counter": "estimate", "tokens": 5}


async def test_exact_counters_differ_where_the_encodings_differ(
    sqlite_api: httpx.AsyncClient,
) -> None:
    sample = "请检查一下预算计算是否正确，并解释为什么会触发压缩。"
    o200k = (await count(sqlite_api, counter=O200K, text=sample)).json()["tokens"]
    cl100k = (await count(sqlite_api, counter=CL100K, text=sample)).json()["tokens"]
    assert 0 < o200k < cl100k  # o200k's larger vocabulary needs fewer tokens for Chinese


async def test_content_is_counted_as_sent_and_artifacts_never_count(
    sqlite_api: httpx.AsyncClient,
) -> None:
    result: dict[str, Any] = {
        "type": "tool_result",
        "id": "c1",
        "name": "read",
        "output": text("def main() -> None:\n    pass\n"),
        "state": "success",
    }
    with_artifacts = {**result, "artifacts": [{"kind": "file_change", "payload": {"x": "y" * 500}}]}
    for counter in ("estimate", O200K):
        plain = (await count(sqlite_api, counter=counter, content=[result])).json()["tokens"]
        extra = (await count(sqlite_api, counter=counter, content=[with_artifacts])).json()
        assert extra["tokens"] == plain > 0
    # estimate: ceil(bytes of the compact JSON / 4) — `[{"type":"text","text":"hello world"}]`.
    estimate = await count(sqlite_api, content=text("hello world"))
    assert estimate.json()["tokens"] == -(-len('[{"type":"text","text":"hello world"}]') // 4)


async def test_a_prepare_body_gives_the_budget_of_the_request_it_builds(
    sqlite_api: httpx.AsyncClient,
) -> None:
    prepared = await sqlite_api.post("/v1/prepare", json=prepare_body())
    budget = prepared.json()["budget"]
    response = await count(sqlite_api, prepare=prepare_body())
    assert response.status_code == 200, response.text
    assert response.json() == {
        "counter": "estimate",
        "tokens": budget["estimated_input_tokens"],
        "regions": {
            "system_context_tokens": 17,
            "conversation_tokens": 407,
            "tool_surface_tokens": budget["tool_surface_tokens"],
            "estimated_input_tokens": budget["estimated_input_tokens"],
        },
    }


async def test_a_prepare_body_with_an_exact_counter(sqlite_api: httpx.AsyncClient) -> None:
    response = await count(sqlite_api, counter=O200K, prepare=prepare_body())
    assert response.status_code == 200, response.text
    body = response.json()
    regions = body["regions"]
    assert body["counter"] == O200K
    assert body["tokens"] == regions["estimated_input_tokens"]
    assert body["tokens"] == (
        regions["system_context_tokens"]
        + regions["conversation_tokens"]
        + regions["tool_surface_tokens"]
    )
    # "agent" and "project" are one o200k token each, and each part is framed as a system
    # message (3 + role), as the user message is; the reply priming adds 3: far from the
    # estimate's 407 for 1600 repeated letters.
    assert regions["system_context_tokens"] == 2 * (1 + 3 + 1)
    assert 3 + 1 + 3 < regions["conversation_tokens"] < 407


async def test_a_prepare_body_uses_the_models_counter_by_default(
    sqlite_api: httpx.AsyncClient,
) -> None:
    model = {"context_window_tokens": 1000, "max_output_tokens": 400, "token_counter": CL100K}
    response = await count(sqlite_api, prepare=prepare_body(model=model))
    assert response.json()["counter"] == CL100K


async def test_an_unknown_counter_is_refused_with_the_valid_names(
    sqlite_api: httpx.AsyncClient,
) -> None:
    response = await count(sqlite_api, counter="tiktoken:p50k_base", text="hi")
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "unknown_token_counter"
    assert O200K in problem["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"counter": "estimate"},
        {"text": "a", "content": [{"type": "text", "text": "a"}]},
        {"text": "a", "prepare": {"model_id": "local"}},
    ],
    ids=["none", "text+content", "text+prepare"],
)
async def test_exactly_one_thing_to_count(
    sqlite_api: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await sqlite_api.post("/v1/tokens/count", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    assert "exactly one of `text`, `content` or `prepare`" in response.json()["detail"]


async def test_an_unknown_model_in_a_prepare_body_is_not_found(
    sqlite_api: httpx.AsyncClient,
) -> None:
    body = prepare_body()
    del body["model"]
    body["model_id"] = "no-such-model"
    response = await count(sqlite_api, prepare=body)
    assert response.status_code == 422
    assert response.json()["code"] == "unknown_model_id"
    assert response.json()["field"] == "prepare.model_id"
