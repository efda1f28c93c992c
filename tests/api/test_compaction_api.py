"""Compaction API end to end (spec §7, acceptance list §3), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.api.schemas.fields import MAX_EXACT_INT
from app.core.compaction import SUMMARY_INSTRUCTION, SUMMARY_PREAMBLE
from tests.api.helpers import (
    append,
    assistant_calls,
    new_session,
    provenance_without_tokens,
    stored,
    text,
    tool_result,
    user,
)
from tests.conftest import client_for, make_settings
from tests.services.compaction.builders import VALID, scripted_model

pytestmark = pytest.mark.anyio

FAST = {"summary_retry_delay_seconds": 0.0, "summary_attempt_timeout_seconds": 5.0}
BIGINT_MAX = 2**63 - 1  # the largest sequence the store can hold (BIGINT, SQLite INTEGER)
# The largest a JSON or query number may name (every reader keeps it exactly); a selector is a
# string and goes up to BIGINT_MAX.


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url, **FAST)):
        yield client


def assistant(t: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text(t)}


async def conversation(
    api: httpx.AsyncClient, script: list[dict[str, Any]] | None = None, **session: Any
) -> str:
    """A session with four messages; ``script``: its summary model is scripted so."""
    if script is not None:
        await scripted_model(api, "summary", script)
        session["summary_model_id"] = "summary"
    sid = await new_session(api, **session)
    response = await append(
        api,
        sid,
        user("Fix the flaky login test in auth/session.py."),
        assistant_calls(("call-1", "read")),
        tool_result("call-1", "def login(): ..."),
        assistant("The test races on the session cookie."),
    )
    assert response.status_code == 201, response.text
    return sid


async def context(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await api.get(f"/v1/sessions/{sid}/context")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def compact(api: httpx.AsyncClient, sid: str, **body: Any) -> httpx.Response:
    return await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True, **body})


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"][0].get("text", m["content"][0]["type"])) for m in messages]


async def test_manual_compaction_installs_replay_summary_reminder(
    api: httpx.AsyncClient,
) -> None:
    sid = await conversation(api, [{"text": "Here it is:\n" + VALID}])
    before = await context(api, sid)

    response = await compact(api, sid)

    assert response.status_code == 201, response.text
    checkpoint = response.json()
    assert checkpoint["kind"] == "manual"
    assert checkpoint["summary"] == VALID  # text before the root is dropped
    assert checkpoint["through_message_sequence"] == 4
    assert checkpoint["replaced_through_message_sequence"] == 4
    assert checkpoint["last_user_message_sequence"] == 1
    assert checkpoint["attempts"] == 1
    assert checkpoint["trigger"] is None  # manual: no window, no estimate
    assert checkpoint["trigger_turn_id"] is None
    assert checkpoint["model"] == "summary"
    assert all(v is not None for v in checkpoint["timings"].values())
    assert checkpoint["conversation_tokens_before"] > 0
    assert checkpoint["conversation_tokens_after"] > 0
    after = await context(api, sid)
    assert texts(after["request"]["messages"]) == [
        ("system", "You are a careful agent."),
        ("user", "Fix the flaky login test in auth/session.py."),
        ("user", SUMMARY_PREAMBLE + VALID),
        ("user", checkpoint["runtime_reminder"]),
    ]
    assert checkpoint["runtime_reminder"] == (
        '<system_reminder format_version="1">\n'
        "No additional durable runtime state was recorded at compaction time.\n"
        "</system_reminder>"
    )
    # The unchanged system prefix and tool definitions are byte-identical.
    assert after["request"]["messages"][0] == before["request"]["messages"][0]
    assert after["request"]["tools"] == before["request"]["tools"]
    assert provenance_without_tokens(after) == [
        {"type": "synthesized", "reason": "last_user_request_replay"},
        {"type": "synthesized", "reason": "compaction_summary"},
        {"type": "synthesized", "reason": "system_reminder"},
    ]
    # Nothing stored is deleted.
    assert len(await stored(api, sid)) == 4
    listing = (await api.get(f"/v1/sessions/{sid}/compactions")).json()
    assert [c["compaction_id"] for c in listing["compactions"]] == [checkpoint["compaction_id"]]
    one = await api.get(f"/v1/sessions/{sid}/compactions/{checkpoint['compaction_id']}")
    assert one.json() == checkpoint | {"timings": one.json()["timings"]}


async def test_next_request_order_after_compaction_is_exact(api: httpx.AsyncClient) -> None:
    """system, replay, summary, reminder, World State, newer messages."""
    provided = {
        "provided": {"working_directory": "/w", "layout": ["a.py"], "agents_md": "Be kind."}
    }
    sid = await conversation(api, workspace=provided)
    checkpoint = (await compact(api, sid)).json()
    sampled = await api.post(f"/v1/sessions/{sid}/prepare", json={})
    assert sampled.status_code == 200, sampled.text
    await append(api, sid, user("Now also fix logout."))

    messages = (await context(api, sid))["request"]["messages"]

    roles_and_starts = [(m["role"], m["content"][0]["text"][:30]) for m in messages]
    assert roles_and_starts == [
        ("system", "You are a careful agent."),
        ("user", "Fix the flaky login test in au"),
        ("user", SUMMARY_PREAMBLE[:30]),
        ("user", checkpoint["runtime_reminder"][:30]),
        ("user", "<user_project_context format_v"),
        ("user", "<project_instructions>\nBe kind"),
        ("user", "<sandbox_policy>\nmode: auto\nwo"),
        ("user", "Now also fix logout."),
    ]
    # Inspection equals the real request the session prepare returned.
    real = sampled.json()["request"]["messages"]
    assert messages[:-1] == real


async def test_summary_request_excludes_world_state_and_keeps_skill_bodies(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    skill = "<skill>\n<name>tests</name>\n<path>/s/SKILL.md</path>\nRun pytest -q.\n</skill>"
    await append(
        api,
        sid,
        {"role": "user", "kind": "world_state", "content": text("<sandbox_policy>x")},
        {"role": "user", "kind": "skill_instruction", "content": text(skill)},
        user("Run the tests."),
    )

    response = await api.get(f"/v1/sessions/{sid}/compactions/request")

    assert response.status_code == 200, response.text
    body = response.json()
    assert texts(body["request"]["messages"]) == [
        ("system", "You are a careful agent."),
        ("user", skill),
        ("user", "Run the tests."),
        ("user", SUMMARY_INSTRUCTION),
    ]
    assert body["request"]["tools"] == []
    assert body["through_message_sequence"] == 3
    # Replay after compaction keeps only the user-visible request, not the skill body.
    checkpoint = (await compact(api, sid)).json()
    assert checkpoint["last_user_message_sequence"] == 3
    assert "<sandbox_policy>" not in checkpoint["summary"] + checkpoint["runtime_reminder"]


async def test_bring_your_own_model_installs_a_posted_summary(api: httpx.AsyncClient) -> None:
    sid = await conversation(api)
    request = (
        await api.get(f"/v1/sessions/{sid}/compactions/request", params={"encode": "openai_chat"})
    ).json()
    assert request["provider_payload"] is not None
    assert request["request"]["max_output_tokens"] <= 16_384

    invalid = await compact(api, sid, summary=VALID.replace("## 4. Errors and Fixes", "## 4."))
    assert invalid.status_code == 422
    assert invalid.headers["content-type"] == "application/problem+json"
    assert invalid.json()["code"] == "invalid_summary"
    assert (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []

    stale = await compact(api, sid, summary=VALID, expected_through_message_sequence=3)
    assert stale.status_code == 409
    assert stale.json()["code"] == "conversation_changed"

    response = await compact(
        api,
        sid,
        summary=VALID,
        model="my-model",
        expected_through_message_sequence=request["through_message_sequence"],
    )
    assert response.status_code == 201, response.text
    assert response.json()["model"] == "my-model"
    messages = (await context(api, sid))["request"]["messages"]
    assert messages[2]["content"][0]["text"] == SUMMARY_PREAMBLE + VALID


async def test_failed_summaries_change_nothing(api: httpx.AsyncClient) -> None:
    """Three failures: 502, no checkpoint, the conversation byte-identical."""
    sid = await conversation(
        api,
        [
            {"text": VALID, "tool_calls": [{"name": "read", "input": {}}]},
            {"error": "server_error"},
            {"text": "no root at all"},
        ],
    )
    before = (await api.get(f"/v1/sessions/{sid}/context")).content

    response = await compact(api, sid)

    assert response.status_code == 502
    problem = response.json()
    assert problem["code"] == "summary_retries_exhausted"
    assert problem["attempts"] == 3
    reasons = [a["reason"] for a in problem["attempt_errors"]]
    assert reasons[0] == "the response requested a tool call"
    assert problem["attempt_errors"][2]["response_text"] == "no root at all"
    assert (await api.get(f"/v1/sessions/{sid}/context")).content == before
    assert (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []


async def test_first_attempt_invalid_second_valid(api: httpx.AsyncClient) -> None:
    sid = await conversation(api, [{"text": VALID, "finish_reason": "length"}, {"text": VALID}])

    response = await compact(api, sid)

    assert response.status_code == 201, response.text
    assert response.json()["attempts"] == 2


async def test_rewind_hides_the_tail_and_survives_a_reload(
    api: httpx.AsyncClient, database_url: str
) -> None:
    sid = await conversation(api)
    first = (await compact(api, sid)).json()
    await append(api, sid, user("Abandoned idea."), assistant("Abandoned answer."))
    second = (await compact(api, sid)).json()
    await append(api, sid, user("More abandoned work."))

    response = await api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": first["compaction_id"]}
    )

    assert response.status_code == 201, response.text
    rewind = response.json()
    assert rewind["kind"] == "rewind"
    assert rewind["parent_compaction_id"] == first["compaction_id"]
    assert rewind["summary"] == first["summary"]
    assert rewind["through_message_sequence"] == first["through_message_sequence"] == 4
    assert rewind["replaced_through_message_sequence"] == 7
    assert rewind["attempts"] == 0
    assert second["through_message_sequence"] == 6
    assert len(await stored(api, sid)) == 7  # nothing deleted
    shown = await context(api, sid)
    assert texts(shown["request"]["messages"])[1:] == [
        ("user", "Fix the flaky login test in auth/session.py."),
        ("user", SUMMARY_PREAMBLE + first["summary"]),
        ("user", rewind["runtime_reminder"]),
    ]
    # A new app instance on the same database shows exactly the same request.
    async for fresh in client_for(make_settings(database_url, **FAST)):
        assert (await fresh.get(f"/v1/sessions/{sid}/context")).json() == shown
    unknown = await api.post(f"/v1/sessions/{sid}/rewind", json={"compaction_id": "cmp-nope"})
    assert unknown.status_code == 422
    assert (unknown.json()["code"], unknown.json()["field"]) == (
        "unknown_compaction_id",
        "compaction_id",
    )


async def test_transcript_pages_raw_messages_up_to_the_fact_boundary(
    api: httpx.AsyncClient,
) -> None:
    sid = await conversation(api)
    missing = await api.get(f"/v1/sessions/{sid}/transcript")
    assert missing.status_code == 404
    assert missing.json()["code"] == "compaction_not_found"
    checkpoint = (await compact(api, sid)).json()
    await append(api, sid, user("After the boundary."))

    seen: list[dict[str, Any]] = []
    after = 0
    while True:
        page = (
            await api.get(
                f"/v1/sessions/{sid}/transcript", params={"after_sequence": after, "limit": 3}
            )
        ).json()
        assert page["compaction_id"] == checkpoint["compaction_id"]
        assert page["through_message_sequence"] == 4
        seen.extend(page["messages"])
        if not page["has_more"]:
            assert page["next_after_sequence"] is None
            break
        after = page["next_after_sequence"]
    raw = await stored(api, sid)
    assert seen == raw[:4]  # raw rows only, every one, never past the boundary
    for bad, code in (
        ({"limit": 0}, "invalid_limit"),
        ({"limit": 51}, "invalid_limit"),
        ({"after_sequence": -1}, "invalid_after_sequence"),
    ):
        response = await api.get(f"/v1/sessions/{sid}/transcript", params=bad)
        assert response.status_code == 422
        assert response.json()["code"] == code


async def test_replay_selectors(api: httpx.AsyncClient) -> None:
    sid = await conversation(api)
    checkpoint = (await compact(api, sid)).json()
    await append(api, sid, user("Later."))
    cid = checkpoint["compaction_id"]

    async def replay(selector: str) -> dict[str, Any]:
        response = await api.get(f"/v1/sessions/{sid}/replay", params={"selector": selector})
        assert response.status_code == 200, response.text
        return dict(response.json())

    latest = await replay("latest")
    assert [i["origin"]["type"] for i in latest["items"]] == ["synthetic"] * 3 + ["real"]
    assert latest["through_message_sequence"] == 5
    only = await replay(f"compaction:{cid}")
    assert only["items"] == latest["items"][:3]
    assert [i["origin"]["reason"] for i in only["items"]] == [
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
    ]
    early = await replay("through_message:2")
    assert early["compaction_id"] is None
    assert [i["origin"]["sequence"] for i in early["items"]] == [1, 2]
    assert (await replay("through_message:5"))["items"] == latest["items"]
    for bad in ("nope", "through_message:-1", "compaction:"):
        response = await api.get(f"/v1/sessions/{sid}/replay", params={"selector": bad})
        assert response.status_code == 422
        assert response.json()["code"] == "invalid_selector"


async def test_sequences_past_the_store_range_are_422_not_500(api: httpx.AsyncClient) -> None:
    sid = await conversation(api)
    cid = (await compact(api, sid)).json()["compaction_id"]

    async def get(path: str, **params: Any) -> httpx.Response:
        return await api.get(f"/v1/sessions/{sid}/{path}", params=params)

    transcript = await get("transcript", after_sequence=MAX_EXACT_INT)
    assert transcript.status_code == 200, transcript.text
    assert transcript.json()["messages"] == []
    listed = await get("compactions", before_sequence=MAX_EXACT_INT)
    assert [c["compaction_id"] for c in listed.json()["compactions"]] == [cid]
    through = await get("replay", selector=f"through_message:{BIGINT_MAX}")
    assert through.json()["items"] == (await get("replay")).json()["items"]
    over = BIGINT_MAX + 1
    for response, code in (
        (await get("transcript", after_sequence=MAX_EXACT_INT + 1), "invalid_request"),
        (await get("compactions", before_sequence=MAX_EXACT_INT + 1), "invalid_request"),
        (await get("replay", selector=f"through_message:{over}"), "invalid_selector"),
    ):
        assert response.status_code == 422, response.text
        assert response.json()["code"] == code


async def test_refusals_are_problems_that_change_nothing(api: httpx.AsyncClient) -> None:
    empty = await new_session(api)
    response = await compact(api, empty)
    assert (response.status_code, response.json()["code"]) == (409, "empty_conversation")
    sid = await new_session(api)
    await append(api, sid, {"role": "user", "kind": "skill_instruction", "content": text("s")})
    response = await compact(api, sid)
    assert (response.status_code, response.json()["code"]) == (409, "missing_last_user")
    response = await compact(api, "ses-unknown")
    assert (response.status_code, response.json()["code"]) == (404, "session_not_found")
    # An undecodable artifact (compaction_error, spec §7.5) can no longer be stored: see
    # tests/api/test_store_fix_artifacts.py and tests/core/compaction/test_runtime_state.py.
    for s in (empty, sid):
        assert (await api.get(f"/v1/sessions/{s}/compactions")).json()["compactions"] == []


async def test_reload_and_metrics(api: httpx.AsyncClient) -> None:
    sid = await conversation(api)
    await compact(api, sid)
    response = await api.post(f"/v1/sessions/{sid}/reload")
    assert response.status_code == 200, response.text
    assert response.json()["reload_required"] is False
    metrics = (await api.get("/metrics")).text
    assert 'ctxsvc_compactions_total{kind="manual",outcome="completed"} 1.0' in metrics
