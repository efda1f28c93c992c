"""Exact budgets frame every region's messages by one rule: a system part
costs what OpenAI's cookbook recipe charges a system message, exactly as a conversation message
costs what it charges that message. Checked against the recipe itself (``num_tokens_from_messages``
of "How to count tokens with tiktoken", run on tiktoken's own encodings) and against the prompt
tokens the cookbook prints for its tools example (the API's reported usage)."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest
import tiktoken

from tests.api.helpers import append, new_session, user
from tests.providers.tokenizers.test_counter import COOKBOOK_TOOLS, COOKBOOK_TOOLS_TOKENS

pytestmark = pytest.mark.anyio


def num_tokens_from_messages(messages: list[dict[str, str]], encoding: tiktoken.Encoding) -> int:
    """The cookbook's function (§6), as published, for gpt-4o / gpt-4 era models."""
    tokens_per_message = 3
    tokens_per_name = 1
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            num_tokens += len(encoding.encode(value))
            if key == "name":
                num_tokens += tokens_per_name
    num_tokens += 3  # every reply is primed with <|start|>assistant<|message|>
    return num_tokens


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


SYSTEM = [
    ("core/agent-system", "You are a careful coding agent. Answer in plain English."),
    ("project", "The repository is a FastAPI service; its tests run with pytest."),
    ("policy", "Never print secrets. Ask before deleting files — always."),
]
CONVERSATION = [
    ("user", "Why does the budget trigger compaction so early?"),
    ("assistant", "Because the reserved output counts against the window."),
    ("user", "お誕生日おめでとう — and show me the figures, please."),
]


def model(encoding_name: str, **limits: int) -> dict[str, Any]:
    capabilities = {"context_window_tokens": 100_000, "max_output_tokens": 1_000, **limits}
    return {**capabilities, "token_counter": f"tiktoken:{encoding_name}"}


def prepare_body(encoding_name: str, **limits: int) -> dict[str, Any]:
    return {
        "system_context": [{"key": key, "content": text(t)} for key, t in SYSTEM],
        "conversation": [{"role": role, "content": text(t)} for role, t in CONVERSATION],
        "model": model(encoding_name, **limits),
    }


def recipe_messages() -> list[dict[str, str]]:
    return [{"role": "system", "content": t} for _, t in SYSTEM] + [
        {"role": role, "content": t} for role, t in CONVERSATION
    ]


async def test_the_budget_equals_the_cookbook_recipe(
    sqlite_api: httpx.AsyncClient, encoding_name: str, reference: tiktoken.Encoding
) -> None:
    response = await sqlite_api.post("/v1/prepare", json=prepare_body(encoding_name))
    assert response.status_code == 200, response.text
    budget = response.json()["budget"]
    assert budget["estimated_input_tokens"] == num_tokens_from_messages(
        recipe_messages(), reference
    )
    # The split: each system part is one framed system message; the conversation carries its
    # messages' framing and the reply priming.
    system_only = [{"role": "system", "content": t} for _, t in SYSTEM]
    assert budget["system_context_tokens"] == num_tokens_from_messages(system_only, reference) - 3


async def test_the_cookbook_tools_example_costs_what_the_api_reported(
    sqlite_api: httpx.AsyncClient, encoding_name: str
) -> None:
    function = COOKBOOK_TOOLS[0]["function"]
    body = {
        "system_context": [
            {
                "key": "core/agent-system",
                "content": text(
                    "You are a helpful assistant that can answer to questions about the weather."
                ),
            }
        ],
        "conversation": [
            {"role": "user", "content": text("What's the weather like in San Francisco?")}
        ],
        "tools": [
            {
                "name": function["name"],
                "description": function["description"],
                "input_schema": function["parameters"],
            }
        ],
        "model": model(encoding_name),
    }
    response = await sqlite_api.post("/v1/prepare", json=body)
    assert response.status_code == 200, response.text
    assert (
        response.json()["budget"]["estimated_input_tokens"] == COOKBOOK_TOOLS_TOKENS[encoding_name]
    )


def window_for_line(line: int, max_output: int) -> int:
    """The smallest window whose auto-compact limit, ceil((window − output) × 85 / 100), is
    ``line`` (every integer is one: the limit grows by 0 or 1 per window token)."""
    window = max_output + math.floor(line * 100 / 85) - 2
    while math.ceil((window - max_output) * 85 / 100) < line:
        window += 1
    return window


async def test_the_trigger_line_uses_the_framed_count(
    sqlite_api: httpx.AsyncClient, encoding_name: str, reference: tiktoken.Encoding
) -> None:
    used = num_tokens_from_messages(recipe_messages(), reference) + 50  # + reserved output
    on_the_line = window_for_line(used, 50)
    over_it = window_for_line(used + 1, 50)
    for window, reaches in ((on_the_line, True), (over_it, False)):
        limits = {"context_window_tokens": window, "max_output_tokens": 50}
        response = await sqlite_api.post("/v1/prepare", json=prepare_body(encoding_name, **limits))
        budget = response.json()["budget"]
        assert budget["auto_compact_token_limit"] == (used if reaches else used + 1)
        assert budget["reaches_auto_compact_limit"] is reaches


async def test_a_sessions_context_is_framed_the_same_way(
    api: httpx.AsyncClient, encoding_name: str, reference: tiktoken.Encoding
) -> None:
    """Inspection of a stored session (both engines): its agent prompt is the one system part;
    with the tool surface left aside, the budget is the recipe's count of the messages."""
    model_id = f"framing-{encoding_name}"
    response = await api.put(
        f"/v1/models/{model_id}",
        json={**model(encoding_name), "provider": {"kind": "local"}},
    )
    assert response.status_code in (200, 201), response.text
    prompt = "You are a careful agent; keep answers short."
    sid = await new_session(api, model_id=model_id, agent={"system_prompt": prompt, "tools": []})
    assert (await append(api, sid, user("List the files, please."))).status_code == 201
    budget = (await api.get(f"/v1/sessions/{sid}/context")).json()["budget"]
    expected = num_tokens_from_messages(
        [
            {"role": "system", "content": prompt},
            {"role": "user", "content": "List the files, please."},
        ],
        reference,
    )
    assert budget["counter"] == f"tiktoken:{encoding_name}"
    assert budget["system_context_tokens"] + budget["conversation_tokens"] == expected
