"""Compaction inside turns (spec §6 loop, §7.1): threshold before the first submission, overflow
after a threshold compaction, and a long session that crosses the trigger line many times."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.api.helpers import append, new_session, run_turn, scripted_model, user

pytestmark = pytest.mark.anyio

# Effective input 3 500, trigger line ceil(3 500 × 0.85) = 2 975 tokens.
SMALL = {"context_window_tokens": 4000, "max_output_tokens": 500}


async def small_session(api: httpx.AsyncClient, script: list[dict[str, Any]]) -> str:
    model_id = await scripted_model(api, script, **SMALL)
    return await new_session(
        api,
        model_id=model_id,
        summary_model_id="local",
        agent={"system_prompt": "You are a careful agent."},
    )


async def fill(api: httpx.AsyncClient, session_id: str, chars: int) -> None:
    """Earlier exchanges worth about ``chars / 4`` tokens (no tool results: pruning won't help)."""
    turns = []
    for i in range(chars // 2000):
        turns += [
            user(f"request {i}: " + "x" * 1000),
            {"role": "assistant", "content": [{"type": "text", "text": "answer " + "y" * 1000}]},
        ]
    assert (await append(api, session_id, *turns)).status_code == 201


async def checkpoints(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    listing = (await api.get(f"/v1/sessions/{session_id}/compactions")).json()
    return list(listing["compactions"] if isinstance(listing, dict) else listing)


async def test_threshold_compaction_happens_before_the_first_submission(
    api: httpx.AsyncClient,
) -> None:
    sid = await small_session(api, [{"text": "done"}])
    await fill(api, sid, 14_000)  # ≈ 3 500 tokens: over the line before the turn starts
    turn = await run_turn(api, sid, "continue please")
    assert turn["status"] == "completed", turn
    assert turn["model_calls"] == 1
    (checkpoint,) = await checkpoints(api, sid)
    assert checkpoint["kind"] == "threshold"
    assert checkpoint["trigger_turn_id"] == turn["turn_id"]
    # Installed before the model was called: the assistant answer lies after the boundary.
    messages = (await api.get(f"/v1/sessions/{sid}/messages", params={"limit": 500})).json()
    answer = [
        m
        for m in messages["messages"]
        if m["turn_id"] == turn["turn_id"] and m["role"] == "assistant"
    ]
    assert answer[0]["sequence"] > checkpoint["replaced_through_message_sequence"]
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert (
        context["budget"]["estimated_input_tokens"] <= context["budget"]["effective_input_tokens"]
    )


async def test_an_overflow_after_a_threshold_compaction_fails_the_turn(
    api: httpx.AsyncClient,
) -> None:
    sid = await small_session(api, [{"error": "context_overflow"}, {"text": "never used"}])
    await fill(api, sid, 14_000)
    turn = await run_turn(api, sid, "continue please")
    assert turn["status"] == "failed"
    assert turn["outcome"]["code"] == "model_error"
    # One compaction per logical model call: the threshold one, no overflow compaction.
    assert [c["kind"] for c in await checkpoints(api, sid)] == ["threshold"]


async def test_a_long_offline_session_crosses_the_line_many_times(
    sqlite_api: httpx.AsyncClient,
) -> None:
    api = sqlite_api
    model_id = f"tiny-local-{uuid.uuid4().hex[:8]}"
    body = {"context_window_tokens": 6000, "max_output_tokens": 500, "provider": {"kind": "local"}}
    assert (await api.put(f"/v1/models/{model_id}", json=body)).status_code == 201
    sid = await new_session(
        api, model_id=model_id, agent={"system_prompt": "You are a careful agent."}
    )
    for n in range(200):
        turn = await run_turn(api, sid, f"Step {n} of ticket OPS-{n}: " + "detail " * 80)
        assert turn["status"] == "completed", (n, turn)
        budget = (await api.get(f"/v1/sessions/{sid}/context")).json()["budget"]
        assert budget["estimated_input_tokens"] <= budget["effective_input_tokens"], n

    kinds = [c["kind"] for c in await checkpoints(api, sid)]
    assert kinds.count("threshold") >= 3, kinds
    # Every stored message stays readable: the transcript of the latest checkpoint pages through
    # all raw messages up to its fact boundary, never a synthetic item; the rest is the tail.
    latest = (await checkpoints(api, sid))[0]
    seen: list[int] = []
    after = 0
    while True:
        page = (
            await api.get(
                f"/v1/sessions/{sid}/transcript", params={"after_sequence": after, "limit": 50}
            )
        ).json()
        seen += [m["sequence"] for m in page["messages"]]
        if not page["has_more"]:
            break
        after = page["next_after_sequence"]
    assert seen == list(range(1, latest["through_message_sequence"] + 1))
    total = (await api.get(f"/v1/sessions/{sid}")).json()["message_count"]
    tail = (
        await api.get(
            f"/v1/sessions/{sid}/messages",
            params={"after_sequence": latest["through_message_sequence"], "limit": 500},
        )
    ).json()
    assert [m["sequence"] for m in tail["messages"]] == list(
        range(latest["through_message_sequence"] + 1, total + 1)
    )
