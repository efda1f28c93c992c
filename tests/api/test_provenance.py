"""Provenance through HTTP (spec §19.1): the type of each Conversation message, the
reason of what the service made, and each message's share of ``conversation_tokens``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import (
    append,
    assistant_calls,
    new_session,
    provenance_without_tokens,
    run_turn,
    scripted_model,
    text,
    tool_result,
    user,
)

pytestmark = pytest.mark.anyio

COUNTERS = ["estimate", "tiktoken:o200k_base", "tiktoken:cl100k_base"]


def stateless(counter: str, conversation: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "system_context": [{"key": "core/agent-system", "content": text("You are an agent.")}],
        "conversation": conversation,
        "model": {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "token_counter": counter,
        },
    }


@pytest.mark.parametrize("counter", COUNTERS)
async def test_stateless_provenance_tells_stored_caller_and_service_items_apart(
    stateless_client: httpx.AsyncClient, counter: str
) -> None:
    conversation = [
        {
            "role": "user",
            "content": text("Stored ünï 界."),
            "origin": {"type": "real", "message_id": "m1"},
        },
        {"role": "user", "content": text("Live, no id.")},  # origin defaults to real, no id
        {
            "role": "user",
            "content": text("An earlier summary."),
            "origin": {"type": "synthetic", "compaction_id": "k1", "reason": "compaction_summary"},
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "ls", "input": "{}"}],
            "origin": {"type": "real", "message_id": "m4", "sequence": 4},
        },
    ]
    response = await stateless_client.post("/v1/prepare", json=stateless(counter, conversation))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["budget"]["counter"] == counter
    assert provenance_without_tokens(result) == [
        {"type": "persisted", "message_id": "m1", "sequence": None},
        {"type": "provided"},
        {"type": "synthesized", "reason": "compaction_summary"},
        {"type": "persisted", "message_id": "m4", "sequence": 4},
        {"type": "synthesized", "reason": "interrupted_tool_result"},  # the call had no result
    ]
    assert all(p["tokens"] > 0 for p in result["provenance"])


@pytest.mark.parametrize("counter", COUNTERS)
async def test_a_sessions_context_shares_add_up_before_and_after_a_compaction(
    api: httpx.AsyncClient, counter: str
) -> None:
    model_id = await scripted_model(
        api, [{"text": "Done."}], token_counter=counter, context_window_tokens=200_000
    )
    sid = await new_session(api, model_id=model_id, summary_model_id="local")
    await append(api, sid, user("List the files, please."), assistant_calls(("c1", "ls")))
    await append(api, sid, tool_result("c1", "a.py\nb.py\n" * 50))
    turn = await run_turn(api, sid, "And now summarize them.")
    assert turn["status"] == "completed", turn

    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    provenance = provenance_without_tokens(context)  # checks the shares add up
    stored = (await api.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert [(p["message_id"], p["sequence"]) for p in provenance] == [
        (m["message_id"], m["sequence"]) for m in stored
    ]

    compacted = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert compacted.status_code == 201, compacted.text
    after = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert [p.get("reason") for p in provenance_without_tokens(after)] == [
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
    ]
    # The summary request ends with the instruction the service adds: supplied, never stored.
    request = (await api.get(f"/v1/sessions/{sid}/compactions/request")).json()
    assert provenance_without_tokens(request)[-1] == {"type": "provided"}
