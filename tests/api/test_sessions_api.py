"""Sessions, append rules, paging and context inspection through HTTP, on both backends."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.api.schemas.fields import MAX_EXACT_INT
from tests.api.helpers import (
    append,
    assistant_calls,
    new_session,
    provenance_without_tokens,
    session_body,
    stored,
    text,
    tool_result,
    user,
)

pytestmark = pytest.mark.anyio

# The largest sequence a query number may name (every JSON reader keeps it exactly).
QUERY_MAX = MAX_EXACT_INT


async def test_create_read_patch_and_list(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/sessions", json=session_body(title="first"))
    assert created.status_code == 201
    session = created.json()
    assert session["summary_model_id"] == "local"  # defaults to model_id
    assert session["agent"]["max_model_calls"] == 20
    assert session["agent"]["doom_loop_threshold"] == 3
    assert session["sandbox"] == {"mode": "auto", "available": True}

    patched = await api.patch(
        f"/v1/sessions/{session['id']}",
        json={"title": "renamed", "disabled_skills": ["b", "a", "a"]},
    )
    assert patched.status_code == 200
    assert patched.json()["title"] == "renamed"
    assert patched.json()["disabled_skills"] == ["a", "b"]
    assert (await api.get(f"/v1/sessions/{session['id']}")).json()["title"] == "renamed"


async def test_list_is_newest_first_and_cursor_paginated(api: httpx.AsyncClient) -> None:
    ids = [await new_session(api, title=f"s{i}") for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/v1/sessions", params=params)).json()
        seen += [s["id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    mine = [s for s in seen if s in ids]
    assert mine == list(reversed(ids))
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"model_id": "nope"}, 422, "unknown_model_id"),
        ({"summary_model_id": "nope"}, 422, "unknown_summary_model_id"),
        (
            {"agent": {"system_prompt": "x", "tools": [{"name": "update_plan"}]}},
            422,
            "tool_name_conflict",
        ),
        ({"agent": {"system_prompt": ""}}, 422, "invalid_request"),
        # Blank: every prepare and turn of the session would refuse it (found by a contract
        # run with another seed: such a session was stored, then could never be used).
        ({"agent": {"system_prompt": " \n\u3000"}}, 422, "empty_system_context_part"),
        ({"workspace": {"working_directory": "/etc"}}, 422, "workspace_not_allowed"),
        ({"sandbox": {"mode": "yolo"}}, 422, "invalid_request"),
    ],
)
async def test_bad_session_input_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, overrides: dict[str, Any], status: int, code: str
) -> None:
    before = (await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"]
    response = await api.post("/v1/sessions", json=session_body(**overrides))
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    after = (await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"]
    assert len(after) == len(before)


async def test_unknown_session_is_404(api: httpx.AsyncClient) -> None:
    for response in (
        await api.get("/v1/sessions/ses-missing"),
        await api.get("/v1/sessions/ses-missing/context"),
        await append(api, "ses-missing", user("hi")),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "session_not_found"


async def test_append_allocates_sequences_and_pages(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    first = await append(api, sid, user("one"), user("two"))
    assert first.status_code == 201
    assert [m["sequence"] for m in first.json()["messages"]] == [1, 2]
    second = await append(api, sid, user("three"))
    assert second.json()["messages"][0]["sequence"] == 3
    page = (await api.get(f"/v1/sessions/{sid}/messages", params={"limit": 2})).json()
    assert [m["sequence"] for m in page["messages"]] == [1, 2]
    assert page["has_more"] is True
    rest = await api.get(
        f"/v1/sessions/{sid}/messages", params={"after_sequence": page["next_after_sequence"]}
    )
    assert [m["content"][0]["text"] for m in rest.json()["messages"]] == ["three"]
    assert rest.json()["has_more"] is False


async def test_after_sequence_past_the_store_range_is_422_not_500(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("one"))
    url = f"/v1/sessions/{sid}/messages"
    top = await api.get(url, params={"after_sequence": QUERY_MAX})
    assert top.status_code == 200, top.text
    assert top.json() == {"messages": [], "has_more": False, "next_after_sequence": None}
    over = await api.get(url, params={"after_sequence": QUERY_MAX + 1})
    assert over.status_code == 422, over.text
    assert over.json()["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("batch", "status", "code"),
    [
        (
            [user("ok"), {"role": "system", "content": text("x")}],
            422,
            "system_message_in_conversation",
        ),
        ([user("ok"), {"role": "user", "content": []}], 422, "empty_message"),
        ([tool_result("never-called")], 422, "unknown_tool_call"),
        (
            [assistant_calls(("c1", "read")), tool_result("c1"), tool_result("c1")],
            422,
            "duplicate_tool_result",
        ),
        (
            [assistant_calls(("c1", "read")), assistant_calls(("c1", "read"))],
            409,
            "duplicate_tool_call_id",
        ),
        ([{"role": "tool", "content": text("loose text")}], 422, "invalid_tool_message"),
    ],
)
async def test_a_refused_batch_writes_nothing(
    api: httpx.AsyncClient, batch: list[Any], status: int, code: str
) -> None:
    sid = await new_session(api)
    assert (await append(api, sid, user("before"))).status_code == 201
    response = await append(api, sid, *batch)
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    assert [m["sequence"] for m in await stored(api, sid)] == [1]
    # The next accepted append takes the next sequence: nothing was consumed.
    assert (await append(api, sid, user("after"))).json()["messages"][0]["sequence"] == 2


async def test_a_result_for_an_already_resolved_call_is_refused(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("go"), assistant_calls(("c1", "read")), tool_result("c1"))
    again = await append(api, sid, tool_result("c1"))
    assert again.status_code == 409
    assert again.json()["code"] == "tool_result_already_posted"


async def test_tool_rows_take_the_call_name(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("go"), assistant_calls(("c1", "read")))
    await append(api, sid, tool_result("c1"))
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert context["request"]["messages"][-1]["content"][0]["name"] == "read"


async def test_inspection_shows_a_synthesized_result_and_changes_nothing(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("go"), assistant_calls(("c1", "read"), ("c2", "read")))
    await append(api, sid, tool_result("c2"))
    before = await stored(api, sid)
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    tool_messages = [m for m in context["request"]["messages"] if m["role"] == "tool"]
    assert [m["content"][0]["id"] for m in tool_messages] == ["c1", "c2"]
    synthesized = tool_messages[0]["content"][0]
    assert synthesized["state"] == "interrupted"
    assert synthesized["output"][0]["text"] == (
        "Tool result unavailable: the previous turn ended before a durable result was recorded."
    )
    assert provenance_without_tokens(context)[2] == {
        "type": "synthesized",
        "reason": "interrupted_tool_result",
    }
    assert context["projection"]["synthesized_tool_results"] == 1
    assert await stored(api, sid) == before


async def test_inspection_equals_the_stateless_prepare_byte_for_byte(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(
        api,
        sid,
        user("read the file"),
        assistant_calls(("c1", "read")),
        tool_result("c1", "contents " * 50),
        {"role": "assistant", "content": text("done")},
    )
    inspection = await api.get(f"/v1/sessions/{sid}/context")
    assert inspection.status_code == 200
    context = inspection.json()
    rows = await stored(api, sid)
    session = (await api.get(f"/v1/sessions/{sid}")).json()
    tools = (await api.get("/v1/models/local")).json()
    stateless = await api.post(
        "/v1/prepare",
        json={
            "system_context": [
                {"key": "core/agent-system", "content": text(session["agent"]["system_prompt"])}
            ],
            "conversation": [
                {
                    "role": r["role"],
                    "kind": r["kind"],
                    "content": r["content"],
                    "origin": {
                        "type": "real",
                        "message_id": r["message_id"],
                        "sequence": r["sequence"],
                    },
                }
                for r in rows
            ],
            "tools": context["request"]["tools"],
            "model_id": "local",
        },
    )
    assert stateless.status_code == 200, stateless.text
    expected = stateless.json()
    del context["auto_compact_percent"], context["calibration"]  # inspection-only fields
    assert expected.pop("spills") == []  # stateless-only: nothing to write without a directory
    # Opaque, and not comparable across the two (docs/caching.md): a session names its stored
    # messages by their row, a stateless request by their content.
    for answer in (context, expected):
        assert answer.pop("request_digest").startswith("pc1.")
    assert json.dumps(context, sort_keys=False) == json.dumps(expected, sort_keys=False)
    assert tools["context_window_tokens"] == context["budget"]["context_window_tokens"]


async def test_inspection_reports_percent_of_the_trigger_line(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("x" * 4000))
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    budget = context["budget"]
    line = min(budget["auto_compact_token_limit"], budget["effective_input_tokens"])
    used = budget["estimated_input_tokens"] + budget["reserved_output_tokens"]
    assert context["auto_compact_percent"] == round(used * 100 / line, 2)
    assert context["budget"]["counter"] == "estimate"
    assert context["request"]["tools"][-2:] == [
        t
        for t in context["request"]["tools"]
        if t["name"] in ("update_plan", "conversation_history")
    ]
