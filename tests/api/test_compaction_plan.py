"""Every compaction kind carries the session's latest plan (spec §9): a plan
made by ``update_plan`` in an earlier turn is in the runtime state and the reminder of a manual,
threshold, overflow and rewind checkpoint, with no earlier checkpoint to carry it from."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assistant, new_session, run_turn, scripted_model, user

pytestmark = pytest.mark.anyio

FIRST_PLAN = {
    "explanation": "Diagnose INC-42",
    "plan": [
        {"step": "read the ledger logs", "status": "completed"},
        {"step": "compare with the last incident", "status": "in_progress"},
        {"step": "report to the user", "status": "pending"},
    ],
}
SECOND_PLAN = {"plan": [{"step": "write the postmortem", "status": "in_progress"}]}
# Effective input 3 500, trigger line 2 975.
SMALL = {"context_window_tokens": 4000, "max_output_tokens": 500}


def planning(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn's script: the model updates its plan, then answers."""
    return [{"tool_calls": [{"name": "update_plan", "input": plan}]}, {"text": "Planned."}]


def steps_of(checkpoint: dict[str, Any]) -> list[dict[str, str]]:
    plan = checkpoint["runtime_state"]["extensions"]["turn_plan"]
    assert plan["schema_version"] == 1
    return list(plan["value"]["steps"])


async def session_with(api: httpx.AsyncClient, script: list[dict[str, Any]], **caps: Any) -> str:
    model_id = await scripted_model(api, script, **caps)
    return await new_session(api, model_id=model_id, summary_model_id="local")


async def long_history(api: httpx.AsyncClient, session_id: str) -> None:
    """≈ 3 000 tokens of earlier answers: over the small model's line, and a summary shrinks it."""
    for n in range(6):
        answer = f"Finding {n}: " + "the ledger timed out again. " * 70
        assert (await append(api, session_id, user(f"q{n}"), assistant(answer))).status_code == 201


async def checkpoints(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    listing = (await api.get(f"/v1/sessions/{session_id}/compactions")).json()["compactions"]
    full = [
        (await api.get(f"/v1/sessions/{session_id}/compactions/{c['compaction_id']}"))
        for c in listing
    ]
    return [r.json() for r in full]


async def test_a_manual_compaction_carries_the_plan_of_an_earlier_turn(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_with(api, planning(FIRST_PLAN))
    assert (await run_turn(api, sid, "Is it related to the last incident?"))["status"] == (
        "completed"
    )

    checkpoint = (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()

    assert steps_of(checkpoint) == FIRST_PLAN["plan"]
    reminder = checkpoint["runtime_reminder"]
    assert "## Current plan\nDiagnose INC-42\n- [completed] read the ledger logs\n" in reminder
    assert "- [in_progress] compare with the last incident\n- [pending] report to the user\n" in (
        reminder
    )
    # ... and the next request carries it.
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    sent = str(context["request"]["messages"])
    assert "compare with the last incident" in sent


async def test_a_rewind_carries_the_sessions_latest_plan(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [*planning(FIRST_PLAN), *planning(SECOND_PLAN)])
    await run_turn(api, sid, "Diagnose it.")
    first = (await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})).json()
    await run_turn(api, sid, "Now write it up.")

    rewind = await api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": first["compaction_id"]}
    )

    assert rewind.status_code == 201, rewind.text
    assert steps_of(rewind.json()) == SECOND_PLAN["plan"]
    assert "- [in_progress] write the postmortem" in rewind.json()["runtime_reminder"]


async def test_a_threshold_compaction_in_a_later_turn_carries_the_earlier_plan(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_with(api, [*planning(FIRST_PLAN), {"text": "Still comparing."}], **SMALL)
    await run_turn(api, sid, "Diagnose it.")
    await long_history(api, sid)

    turn = await run_turn(api, sid, "Any news?")

    assert turn["status"] == "completed", turn["outcome"]
    [checkpoint] = await checkpoints(api, sid)
    assert checkpoint["kind"] == "threshold"
    assert checkpoint["trigger_turn_id"] == turn["turn_id"]
    assert steps_of(checkpoint) == FIRST_PLAN["plan"]
    assert "compare with the last incident" in checkpoint["runtime_reminder"]


async def test_an_overflow_compaction_carries_the_plan(api: httpx.AsyncClient) -> None:
    script = [*planning(FIRST_PLAN), {"error": "context_overflow"}, {"text": "Resubmitted."}]
    sid = await session_with(api, script)
    await run_turn(api, sid, "Diagnose it.")
    await long_history(api, sid)

    turn = await run_turn(api, sid, "Any news?")

    assert turn["status"] == "completed", turn["outcome"]
    assert turn["outcome"] == {"final_text": "Resubmitted."}
    [checkpoint] = await checkpoints(api, sid)
    assert checkpoint["kind"] == "overflow"
    assert steps_of(checkpoint) == FIRST_PLAN["plan"]
