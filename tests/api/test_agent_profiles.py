"""Any agent, not only a coding agent: the World State sections and control tools an agent
definition chooses (spec §4, §6), on both backends."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.storage.database import create_engine, create_session_factory, unit_of_work
from app.storage.models import AgentSession
from tests.api.helpers import (
    append,
    prepare_session,
    run_turn,
    scripted_model,
    stored,
    user,
    world_state_texts,
)

pytestmark = pytest.mark.anyio

WEATHER_TOOL = {
    "name": "forecast",
    "description": "The forecast for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
WORKSPACE = {
    "provided": {
        "working_directory": "/srv/support",
        "layout": ["faq/", "refunds.md"],
        "agents_md": "Answer in the customer's language.",
        "skills": [{"name": "refund", "description": "Refund an order", "path": "refund.md"}],
    }
}


async def create(api: httpx.AsyncClient, agent: dict[str, Any], **body: Any) -> dict[str, Any]:
    response = await api.post("/v1/sessions", json={"model_id": "local", "agent": agent, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def first_request(api: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    await append(api, session_id, user("Will it rain in Oslo tomorrow?"))
    response = await prepare_session(api, session_id)
    assert response.status_code == 200, response.text
    return dict(response.json()["request"])


def names(request: dict[str, Any]) -> list[str]:
    return [t["name"] for t in request["tools"]]


async def test_a_weather_bot_gets_no_coding_agent_section_and_no_control_tool(
    api: httpx.AsyncClient,
) -> None:
    session = await create(
        api,
        {"system_prompt": "You answer weather questions.", "tools": [WEATHER_TOOL]},
        sandbox={"available": False},
    )
    assert session["agent"]["preset"] == "general"
    assert session["agent"]["control_tools"] == []
    assert session["agent"]["context_sections"]["sandbox_policy"] is False

    request = await first_request(api, session["id"])

    # Its own tool only (no ~427 tokens of update_plan / conversation_history) ...
    assert names(request) == ["forecast"]
    # ... and nothing about a bash it never had: the system prompt, then the question.
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "bash" not in json.dumps(request)
    assert world_state_texts(await stored(api, session["id"])) == []


async def test_a_general_agents_summary_points_at_no_tool_it_lacks(api: httpx.AsyncClient) -> None:
    """After a compaction the weather bot's summary does not send it to conversation_history,
    a tool it was never offered."""
    session = await create(
        api, {"system_prompt": "You answer weather questions.", "tools": [WEATHER_TOOL]}
    )
    for text in ("Will it rain in Oslo tomorrow?", "And in Bergen on Friday? Keep it short."):
        await append(api, session["id"], user(text))
    compacted = await api.post(
        f"/v1/sessions/{session['id']}/compactions", json={"allow_larger": True}
    )
    assert compacted.status_code == 201, compacted.text
    request = await first_request(api, session["id"])
    summary = json.dumps(request["messages"])
    assert "<conversation_summary" in summary
    assert "use conversation_history" not in summary
    assert "conversation_history" not in names(request)


async def test_a_general_agent_sees_its_instructions_and_skills_and_nothing_of_a_coder(
    api: httpx.AsyncClient,
) -> None:
    session = await create(
        api, {"system_prompt": "You help customers.", "tools": []}, workspace=WORKSPACE
    )
    await first_request(api, session["id"])
    texts = world_state_texts(await stored(api, session["id"]))
    # No project layout, no sandbox policy: a general agent asks for them.
    assert [t.split("\n", 1)[0] for t in texts] == ["<project_instructions>", "<available_skills>"]

    with_layout = await create(
        api,
        {"system_prompt": "You analyse data.", "context_sections": {"project_layout": True}},
        workspace=WORKSPACE,
    )
    await first_request(api, with_layout["id"])
    texts = world_state_texts(await stored(api, with_layout["id"]))
    assert texts[0].startswith('<user_project_context format_version="1">')
    assert "- refunds.md" in texts[0]


async def test_a_tool_that_runs_commands_brings_the_sandbox_policy(api: httpx.AsyncClient) -> None:
    shell = {**WEATHER_TOOL, "name": "run_report", "runs_commands": True}
    session = await create(api, {"system_prompt": "You run data reports.", "tools": [shell]})
    assert session["agent"]["context_sections"]["sandbox_policy"] is True
    assert session["agent"]["tools"][0]["runs_commands"] is True

    request = await first_request(api, session["id"])

    assert world_state_texts(await stored(api, session["id"]))[0].startswith("<sandbox_policy>")
    # A flag of the service's: never sent to the model.
    assert request["tools"] == [{k: v for k, v in shell.items() if k != "runs_commands"}]


async def test_each_section_and_control_tool_is_the_agents_choice(api: httpx.AsyncClient) -> None:
    session = await create(
        api,
        {
            "system_prompt": "You help customers.",
            "tools": [WEATHER_TOOL],
            "preset": "coding",
            "context_sections": {"project_layout": False, "sandbox_policy": False},
            # Named in any order, advertised in the service's order.
            "control_tools": ["conversation_history", "update_plan"],
        },
        workspace=WORKSPACE,
    )
    assert session["agent"]["context_sections"] == {
        "project_layout": False,
        "project_instructions": True,
        "skill_catalog": True,
        "sandbox_policy": False,
    }
    request = await first_request(api, session["id"])
    assert names(request) == ["forecast", "update_plan", "conversation_history"]
    texts = world_state_texts(await stored(api, session["id"]))
    assert [t.split("\n", 1)[0] for t in texts] == ["<project_instructions>", "<available_skills>"]

    only_history = await create(
        api,
        {"system_prompt": "x", "control_tools": ["conversation_history"]},
    )
    assert names(await first_request(api, only_history["id"])) == ["conversation_history"]


async def test_the_coding_preset_is_the_request_every_session_had_before(
    api: httpx.AsyncClient, database_url: str
) -> None:
    """A row stored before agents could choose (no preset, sections or control tools) is a
    coding agent; the ``coding`` preset gives the very same request, byte for byte."""
    agent = {"system_prompt": "You are a careful agent.", "tools": [WEATHER_TOOL]}
    coding = await create(api, {**agent, "preset": "coding"}, workspace=WORKSPACE)
    legacy = await create(api, agent, workspace=WORKSPACE)
    engine = create_engine(database_url)
    try:
        async with unit_of_work(create_session_factory(engine)) as db:
            row = await db.get(AgentSession, legacy["id"])
            assert row is not None
            row.agent = {k: row.agent[k] for k in ("system_prompt", "tools")}
    finally:
        await engine.dispose()
    shown = (await api.get(f"/v1/sessions/{legacy['id']}")).json()["agent"]
    assert (shown["preset"], shown["control_tools"]) == (
        "coding",
        ["update_plan", "conversation_history"],
    )

    one, two = await first_request(api, coding["id"]), await first_request(api, legacy["id"])

    assert json.dumps(one, sort_keys=False) == json.dumps(two, sort_keys=False)
    assert names(one) == ["forecast", "update_plan", "conversation_history"]
    assert "<sandbox_policy>" in json.dumps(one)


@pytest.mark.parametrize(
    "agent",
    [
        {"system_prompt": "x", "preset": "weather"},
        {"system_prompt": "x", "control_tools": ["bash"]},
        {"system_prompt": "x", "context_sections": {"sandbox_policy": "yes"}},
        {"system_prompt": "x", "context_sections": {"network_policy": True}},
        {"system_prompt": "x", "tools": [{**WEATHER_TOOL, "runs_commands": 1}]},
    ],
)
async def test_a_choice_the_service_does_not_know_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, agent: dict[str, Any]
) -> None:
    before = (await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"]
    response = await api.post("/v1/sessions", json={"model_id": "local", "agent": agent})
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"
    after = (await api.get("/v1/sessions", params={"limit": 200})).json()["sessions"]
    assert len(after) == len(before)


async def test_a_control_tool_the_agent_was_not_offered_is_not_run(api: httpx.AsyncClient) -> None:
    model_id = await scripted_model(
        api,
        [
            {"tool_calls": [{"name": "update_plan", "input": {"plan": []}}]},
            {"text": "Sunny."},
        ],
    )
    session = await create(
        api, {"system_prompt": "You answer weather questions.", "tools": [WEATHER_TOOL]}
    )
    await api.patch(f"/v1/sessions/{session['id']}", json={"model_id": model_id})
    turn = await run_turn(api, session["id"])
    assert (turn["status"], turn["outcome"]["final_text"]) == ("completed", "Sunny."), turn
    (result,) = [
        b for m in await stored(api, session["id"]) if m["role"] == "tool" for b in m["content"]
    ]
    assert result["state"] == "error"
    assert (
        result["output"][0]["text"] == "tool not found: 'update_plan' (available tools: forecast)"
    )


@pytest.mark.parametrize(
    ("stored_agent", "field"),
    [
        ({"preset": "weather"}, "agent.preset"),
        (
            {"preset": "general", "context_sections": {"sandbox_policy": True}},
            "agent.context_sections",
        ),
        (
            {
                "preset": "general",
                "context_sections": dict.fromkeys(
                    ("project_layout", "project_instructions", "skill_catalog", "sandbox_policy"),
                    False,
                ),
                "control_tools": ["bash"],
            },
            "agent.control_tools",
        ),
    ],
)
async def test_a_stored_choice_this_version_never_writes_is_named(
    api: httpx.AsyncClient, database_url: str, stored_agent: dict[str, Any], field: str
) -> None:
    session = await create(api, {"system_prompt": "x"})
    engine = create_engine(database_url)
    try:
        async with unit_of_work(create_session_factory(engine)) as db:
            row = await db.get(AgentSession, session["id"])
            assert row is not None
            row.agent = {"system_prompt": "x", "tools": [], **stored_agent}
    finally:
        await engine.dispose()
    await append(api, session["id"], user("hi"))
    refused = await prepare_session(api, session["id"])
    assert refused.status_code == 409, refused.text
    assert (refused.json()["code"], refused.json()["field"]) == ("session_config_invalid", field)
