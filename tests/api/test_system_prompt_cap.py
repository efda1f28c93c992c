"""The agent prompt is the System Context of every request: a prompt at the spec §3.3 part cap
(10 000 tokens, strictly below) would make every prepare and turn of the session fail, so the
session is refused when it is created, and a model change that would count it at the cap is
refused too. Nothing is stored either way."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from tests.api.helpers import scripted_model, session_body

pytestmark = pytest.mark.anyio

CAP = 10_000


def estimate_of(prompt: str) -> int:
    # spec §3.1: ceil(bytes / 4) of the part's content as compact JSON.
    content = [{"type": "text", "text": prompt}]
    encoded = json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()
    return math.ceil(len(encoded) / 4)


def prompt_of(tokens: int) -> str:
    """An ASCII prompt the estimate counts as exactly ``tokens``."""
    prompt = "a" * (tokens * 4 - estimate_of("") * 4 + 3)
    while estimate_of(prompt) > tokens:
        prompt = prompt[:-1]
    assert estimate_of(prompt) == tokens
    return prompt


async def session_count(api: httpx.AsyncClient) -> int:
    return len((await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"])


async def test_a_prompt_one_under_the_cap_is_taken(api: httpx.AsyncClient) -> None:
    body = session_body(agent={"system_prompt": prompt_of(CAP - 1), "tools": []})
    response = await api.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    context = await api.get(f"/v1/sessions/{response.json()['id']}/context")
    assert context.status_code == 200
    assert context.json()["budget"]["system_context_tokens"] == CAP - 1


async def test_a_prompt_at_the_cap_refuses_the_session_and_stores_nothing(
    api: httpx.AsyncClient,
) -> None:
    before = await session_count(api)
    body = session_body(agent={"system_prompt": prompt_of(CAP), "tools": []})
    response = await api.post("/v1/sessions", json=body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "system_context_part_too_large"
    assert "core/agent-system" in problem["detail"]
    assert "10000" in problem["detail"].replace(" ", "").replace(",", "")
    assert await session_count(api) == before


async def test_a_model_whose_counter_puts_the_prompt_at_the_cap_is_refused(
    api: httpx.AsyncClient,
) -> None:
    # One token per "x " for o200k, half that for the estimate: fine for the estimate model,
    # over the cap for the exact one.
    prompt = "x " * 11_000
    assert estimate_of(prompt) < CAP
    body = session_body(agent={"system_prompt": prompt, "tools": []})
    created = await api.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    exact = await scripted_model(api, [], token_counter="tiktoken:o200k_base")
    response = await api.patch(f"/v1/sessions/{sid}", json={"model_id": exact})
    assert response.status_code == 422
    assert response.json()["code"] == "system_context_part_too_large"
    assert (await api.get(f"/v1/sessions/{sid}")).json()["model_id"] == "local"
    refused = await api.post("/v1/sessions", json={**body, "model_id": exact})
    assert refused.status_code == 422
    assert refused.json()["code"] == "system_context_part_too_large"
