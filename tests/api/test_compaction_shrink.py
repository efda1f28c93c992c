"""A compaction must make the conversation smaller (spec §9): an in-turn one
that would not is not installed — the turn goes on uncompacted when its request fits and fails
with ``compaction_error`` otherwise — and a manual one reports before/after and says when it
did not shrink anything."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assistant, new_session, run_turn, scripted_model, user
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio

# Effective input 1 500, trigger line 1 275: the reserved output (1 500) alone crosses it, so a
# short history triggers a threshold compaction whose summary would be longer than the history.
RESERVING = {
    "context_window_tokens": 3000,
    "max_output_tokens": 1500,
    "output_reserve_tokens": 1500,
}


async def session_for(api: httpx.AsyncClient, script: list[dict[str, Any]], **agent: Any) -> str:
    model_id = await scripted_model(api, script, **RESERVING)
    return await new_session(
        api,
        model_id=model_id,
        summary_model_id="local",
        agent={"system_prompt": "You are a careful agent.", **agent},
    )


async def checkpoints(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    return list((await api.get(f"/v1/sessions/{session_id}/compactions")).json()["compactions"])


async def test_a_threshold_compaction_that_would_grow_is_not_installed_and_the_turn_goes_on(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_for(api, [{"text": "Recovered."}])
    await append(api, sid, user("Is the service up?"), assistant("Checking."))
    before = (await api.get(f"/v1/sessions/{sid}/context")).json()["budget"]
    assert before["reaches_auto_compact_limit"] is True

    turn = await run_turn(api, sid, "And now?")

    assert turn["status"] == "completed", turn["outcome"]
    assert turn["outcome"] == {"final_text": "Recovered."}
    assert await checkpoints(api, sid) == []
    # The request went out uncompacted: the history is still the active conversation.
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert context["provenance"][0]["type"] == "persisted"


async def test_a_threshold_compaction_that_would_grow_fails_a_request_that_does_not_fit(
    api: httpx.AsyncClient,
) -> None:
    # A system prompt of ≈ 1 600 tokens: over the 1 500 the model takes, whatever the history.
    sid = await session_for(api, [{"text": "never sent"}], system_prompt="rule " * 1280)
    await append(api, sid, user("Is the service up?"), assistant("Checking."))

    turn = await run_turn(api, sid, "And now?")

    assert turn["status"] == "failed"
    assert turn["outcome"]["code"] == "compaction_error"
    message = turn["outcome"]["message"]
    assert "would not reduce the conversation" in message
    assert "so it was not installed" in message
    assert "but the model accepts 1500" in message
    assert await checkpoints(api, sid) == []


async def test_an_overflow_compaction_that_would_grow_fails_with_compaction_error(
    api: httpx.AsyncClient,
) -> None:
    model_id = await scripted_model(
        api, [{"error": "context_overflow"}, {"text": "never used"}], max_output_tokens=100
    )
    sid = await new_session(api, model_id=model_id, summary_model_id="local")
    await append(api, sid, user("Is the service up?"), assistant("Checking."))

    turn = await run_turn(api, sid, "And now?")

    assert turn["status"] == "failed"
    assert turn["outcome"]["code"] == "compaction_error"
    assert "overflow compaction would not reduce" in turn["outcome"]["message"]
    assert "the provider reported the request too large" in turn["outcome"]["message"]
    assert await checkpoints(api, sid) == []


async def test_session_prepare_returns_the_uncompacted_request_or_refuses_with_413(
    api: httpx.AsyncClient,
) -> None:
    fits = await session_for(api, [])
    await append(api, fits, user("Is the service up?"), assistant("Checking."))
    response = await api.post(f"/v1/sessions/{fits}/prepare")
    assert response.status_code == 200, response.text
    assert response.json()["budget"]["reaches_auto_compact_limit"] is True
    assert await checkpoints(api, fits) == []

    too_big = await session_for(api, [], system_prompt="rule " * 1280)
    await append(api, too_big, user("Is the service up?"), assistant("Checking."))
    refused = await api.post(f"/v1/sessions/{too_big}/prepare")
    assert refused.status_code == 413
    problem = refused.json()
    assert problem["code"] == "compaction_error"
    assert problem["conversation_tokens_after"] >= problem["conversation_tokens_before"]
    assert await checkpoints(api, too_big) == []


@pytest.mark.parametrize("byo", [False, True], ids=["service-summary", "own-summary"])
async def test_a_manual_compaction_that_would_grow_is_refused_unless_allowed(
    api: httpx.AsyncClient, byo: bool
) -> None:
    """The README's tour once compacted 97 tokens into 398. Refused with 409
    and both figures, nothing stored; ``allow_larger`` installs it."""
    sid = await new_session(api, summary_model_id="local")
    await append(api, sid, user("Summarize ticket ABC-123."), assistant("Reading it."))
    served = (await api.get(f"/v1/sessions/{sid}/compactions/request")).json()
    covered = {"through_message_sequence": served["through_message_sequence"]}
    body = {"summary": VALID, **covered} if byo else {}
    refused = await api.post(f"/v1/sessions/{sid}/compactions", json=body)
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert problem["code"] == "compaction_not_smaller"
    assert problem["conversation_tokens_after"] >= problem["conversation_tokens_before"] > 0
    assert "allow_larger" in problem["detail"]
    assert await checkpoints(api, sid) == []
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert context["provenance"][0]["type"] == "persisted"

    allowed = await api.post(f"/v1/sessions/{sid}/compactions", json={**body, "allow_larger": True})
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["shrunk"] is False
    assert len(await checkpoints(api, sid)) == 1


async def test_a_manual_compaction_reports_before_and_after_and_says_when_it_did_not_shrink(
    api: httpx.AsyncClient,
) -> None:
    small = await new_session(api, summary_model_id="local")
    await append(api, small, user("Is the service up?"), assistant("Checking."))
    grown = (
        await api.post(f"/v1/sessions/{small}/compactions", json={"allow_larger": True})
    ).json()
    assert grown["conversation_tokens_after"] >= grown["conversation_tokens_before"] > 0
    assert grown["shrunk"] is False
    assert grown["reclaimed_conversation_tokens"] == 0
    assert grown["notice"] == (
        f"this manual compaction did not shrink the conversation "
        f"({grown['conversation_tokens_before']} → {grown['conversation_tokens_after']} "
        "tokens): its summary, replay and reminder are as long as what they replaced or longer"
    )
    listed = (await api.get(f"/v1/sessions/{small}/compactions")).json()["compactions"][0]
    assert (listed["shrunk"], listed["notice"]) == (False, grown["notice"])

    large = await new_session(api, summary_model_id="local")
    await append(api, large, user("Summarize the logs."), assistant("log line\n" * 2000))
    shrunk = (await api.post(f"/v1/sessions/{large}/compactions", json={})).json()
    assert shrunk["conversation_tokens_after"] < shrunk["conversation_tokens_before"]
    assert (shrunk["shrunk"], shrunk["notice"]) == (True, None)


async def test_the_readme_tour_compaction_is_refused_then_allowed(api: httpx.AsyncClient) -> None:
    """The README's "A whole turn, offline" tour, step by step."""
    response = await api.post(
        "/v1/sessions",
        json={"model_id": "local", "agent": {"system_prompt": "You are a careful coding agent."}},
    )
    sid = response.json()["id"]
    turn = await run_turn(api, sid, "Summarize ticket ABC-123.")
    assert turn["status"] == "completed", turn
    refused = await api.post(f"/v1/sessions/{sid}/compactions", json={})
    assert (refused.status_code, refused.json()["code"]) == (409, "compaction_not_smaller")
    allowed = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert allowed.status_code == 201, allowed.text
    checkpoint = allowed.json()
    assert checkpoint["shrunk"] is False
    assert "did not shrink" in checkpoint["notice"]
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    reasons = [p.get("reason") for p in context["provenance"][:3]]
    assert reasons == ["last_user_request_replay", "compaction_summary", "system_reminder"]
