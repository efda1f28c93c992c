"""Turns through the API with the ``scripted`` model kind (spec §6)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.api.helpers import (
    append,
    assistant,
    assistant_calls,
    new_session,
    run_turn,
    scripted_model,
    stored,
    user,
)

pytestmark = pytest.mark.anyio

READ_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


def agent(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "system_prompt": "You are a careful agent.",
        "tools": [{"name": "read", "description": "Read a file", "input_schema": READ_SCHEMA}],
    }
    body.update(overrides)
    return body


async def session_with(
    api: httpx.AsyncClient, script: list[dict[str, Any]], **agent_overrides: Any
) -> str:
    model_id = await scripted_model(api, script)
    return await new_session(
        api, model_id=model_id, summary_model_id="local", agent=agent(**agent_overrides)
    )


async def history(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    """Stored messages without the World State samples every model call adds."""
    return [m for m in await stored(api, session_id) if m["kind"] != "world_state"]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def results_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["content"][0] for m in messages if m["role"] == "tool"]


def result_text(block: dict[str, Any]) -> str:
    return str(block["output"][0]["text"])


async def post_results(
    api: httpx.AsyncClient, session_id: str, turn_id: str, *results: dict[str, Any], wait: bool
) -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{session_id}/turns/{turn_id}/tool-results",
        params={"wait": str(wait).lower()},
        json={"results": list(results)},
    )


def ok(call_id: str, text: str = "file body", state: str = "success") -> dict[str, Any]:
    return {"tool_call_id": call_id, "state": state, "output": [{"type": "text", "text": text}]}


async def test_no_tool_call_completes_after_one_model_call(api: httpx.AsyncClient) -> None:
    sid = await session_with(
        api, [{"text": "Done.", "usage": {"input_tokens": 50, "output_tokens": 3}}]
    )
    turn = await run_turn(api, sid, "hello")
    assert turn["status"] == "completed"
    assert turn["outcome"] == {"final_text": "Done."}
    assert turn["model_calls"] == 1
    assert turn["usage"]["input_tokens"] == 50
    assert turn["usage"]["output_tokens"] == 3
    messages = await history(api, sid)
    assert [(m["role"], m["kind"]) for m in messages] == [
        ("user", "normal"),
        ("assistant", "normal"),
    ]
    assert all(m["turn_id"] == turn["turn_id"] for m in messages)


async def test_caller_tool_round_trip_then_final_answer(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [{"tool_calls": [call("read", path="a.py")]}, {"text": "ok"}])
    turn = await run_turn(api, sid)
    assert turn["status"] == "running"
    assert turn["phase"] == "waiting_tool_results"
    (pending,) = turn["pending_tool_calls"]
    assert pending["name"] == "read"
    assert pending["input"] == '{"path": "a.py"}'
    done = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert done.json()["outcome"]["final_text"] == "ok"
    messages = await history(api, sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert result_text(results_of(messages)[0]) == "file body"
    assert results_of(messages)[0]["name"] == "read"


async def test_several_calls_results_stored_in_provider_order(api: httpx.AsyncClient) -> None:
    plan = {"plan": [{"step": "look", "status": "in_progress"}]}
    sid = await session_with(
        api,
        [
            {
                "tool_calls": [
                    call("read", path="a"),
                    call("update_plan", **plan),
                    call("read", path="b"),
                ]
            },
            {"text": "both read"},
        ],
    )
    turn = await run_turn(api, sid)
    first, second = turn["pending_tool_calls"]
    assert turn["plan"]["plan"] == plan["plan"]
    # The caller answers out of order and in two posts: recorded, the turn waits for the rest.
    partial = await post_results(
        api, sid, turn["turn_id"], ok(second["tool_call_id"], "B"), wait=False
    )
    assert partial.status_code == 200, partial.text
    assert partial.json()["missing_tool_call_ids"] == [first["tool_call_id"]]
    assert [m["role"] for m in await history(api, sid)] == ["user", "assistant"]
    done = await post_results(api, sid, turn["turn_id"], ok(first["tool_call_id"], "A"), wait=True)
    assert done.json()["status"] == "completed"
    results = results_of(await history(api, sid))
    assert [result_text(r) for r in results] == ["A", "Plan updated", "B"]


async def test_rejected_calls_become_results_and_the_model_continues(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_with(
        api,
        [
            {
                "tool_calls": [
                    {"name": "read", "input": "{not json"},
                    call("write", path="x"),
                    call("read", file="x"),
                    call("update_plan", plan=[{"step": " ", "status": "pending"}]),
                ]
            },
            {"text": "recovered"},
        ],
    )
    turn = await run_turn(api, sid)
    assert turn["status"] == "completed"
    assert turn["outcome"]["final_text"] == "recovered"
    texts = [result_text(r) for r in results_of(await history(api, sid))]
    assert texts[0].startswith("invalid tool input: ")
    assert texts[1].startswith("tool not found: 'write'")
    assert texts[2].startswith("invalid arguments for tool 'read': ")
    assert texts[3] == "plan step 0 must not be blank"
    assert all(r["state"] == "error" for r in results_of(await history(api, sid)))


async def test_tool_error_result_is_stored_and_the_turn_continues(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [{"tool_calls": [call("read", path="a")]}, {"text": "saw it"}])
    turn = await run_turn(api, sid)
    (pending,) = turn["pending_tool_calls"]
    error = ok(pending["tool_call_id"], "ENOENT", state="error")
    done = await post_results(api, sid, turn["turn_id"], error, wait=True)
    assert done.json()["status"] == "completed"
    (result,) = results_of(await history(api, sid))
    assert result["state"] == "error"
    assert result_text(result) == "ENOENT"


async def test_doom_loop_at_three_and_remaining_calls_get_the_fixed_result(
    api: httpx.AsyncClient,
) -> None:
    same = call("update_plan", plan=[{"step": "a", "status": "pending"}])
    sid = await session_with(
        api,
        [
            {"tool_calls": [same]},
            {"tool_calls": [same, same, call("read", path="never")]},
        ],
    )
    turn = await run_turn(api, sid)
    assert turn["status"] == "failed"
    assert turn["outcome"] == {"code": "doom_loop", "message": "doom loop detected: update_plan"}
    texts = [result_text(r) for r in results_of(await history(api, sid))]
    assert texts == [
        "Plan updated",
        "Plan updated",
        "doom loop detected for tool 'update_plan'",
        "tool was not executed because the turn already terminated",
    ]
    assert results_of(await history(api, sid))[3]["state"] == "interrupted"


async def test_rejected_calls_do_not_count_for_the_doom_loop(api: httpx.AsyncClient) -> None:
    same = call("update_plan", plan=[])
    sid = await session_with(
        api,
        [{"tool_calls": [same, call("nope"), same, {"name": "read", "input": "["}]}, {"text": "x"}],
        doom_loop_threshold=3,
    )
    assert (await run_turn(api, sid))["status"] == "completed"


async def test_max_model_calls_fails_the_turn(api: httpx.AsyncClient) -> None:
    sid = await session_with(
        api,
        [
            {"tool_calls": [call("update_plan", plan=[])]},
            {"tool_calls": [call("update_plan", explanation="again", plan=[])]},
            {"text": "never reached"},
        ],
        max_model_calls=2,
    )
    turn = await run_turn(api, sid)
    assert turn["outcome"] == {
        "code": "max_model_calls",
        "message": "maximum model calls exceeded: 2",
    }
    assert turn["model_calls"] == 2


async def test_assistant_persistence_failure_runs_no_tool(api: httpx.AsyncClient) -> None:
    plan = {"plan": [{"step": "x", "status": "pending"}]}
    sid = await session_with(
        api, [{"tool_calls": [{"id": "dup", "name": "update_plan", "input": plan}]}]
    )
    # An unresolved call with the same id makes storing the assistant message fail.
    assert (await append(api, sid, assistant_calls(("dup", "read")))).status_code == 201
    turn = await run_turn(api, sid)
    assert turn["status"] == "failed"
    assert turn["outcome"]["code"] == "persistence_error"
    assert turn["plan"] is None
    assert [m["role"] for m in await history(api, sid)] == ["assistant", "user"]


async def test_provider_errors_fail_the_turn_with_model_error(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, [{"error": "rate_limited"}])
    turn = await run_turn(api, sid)
    assert turn["status"] == "failed"
    assert turn["outcome"]["code"] == "model_error"
    empty = await session_with(api, [])
    assert (await run_turn(api, empty))["outcome"]["code"] == "model_error"


async def test_overflow_compacts_and_resubmits_once(api: httpx.AsyncClient) -> None:
    # A history its summary is shorter than: an overflow compaction must shrink it (spec §9).
    earlier = [user("earlier question"), assistant("a long earlier answer. " * 200)]
    sid = await session_with(api, [{"error": "context_overflow"}, {"text": "fits now"}])
    await append(api, sid, *earlier)
    turn = await run_turn(api, sid)
    assert turn["status"] == "completed", turn
    checkpoints = (await api.get(f"/v1/sessions/{sid}/compactions")).json()
    items = checkpoints["compactions"] if isinstance(checkpoints, dict) else checkpoints
    assert [c["kind"] for c in items] == ["overflow"]
    twice = await session_with(api, [{"error": "context_overflow"}, {"error": "context_overflow"}])
    await append(api, twice, *earlier)
    assert (await run_turn(api, twice))["outcome"]["code"] == "model_error"


async def test_each_session_of_a_scripted_model_replays_its_script_from_the_start(
    api: httpx.AsyncClient,
) -> None:
    """The script's position is per session: a second session is not told it has no entry
    left (and a PUT of the model starts every session's script again)."""
    model_id = await scripted_model(api, [{"text": "First answer."}])
    first = await new_session(api, model_id=model_id, agent=agent())
    second = await new_session(api, model_id=model_id, agent=agent())

    assert (await run_turn(api, first))["outcome"]["final_text"] == "First answer."
    turn = await run_turn(api, second)
    assert (turn["status"], turn["outcome"]["final_text"]) == ("completed", "First answer.")

    ran_out = await run_turn(api, first)
    assert ran_out["status"] == "failed"
    assert "has no entry left" in json.dumps(ran_out)
