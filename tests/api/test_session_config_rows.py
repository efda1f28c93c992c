"""A session whose stored configuration this version's API never writes (another version, a hand
edit) still reads, and everything that needs the configuration says which field is wrong and
what to do (409 ``session_config_invalid``) — never an internal error; what PATCH can replace, a
PATCH repairs. Before, these rows made inspection, prepare and compaction answer 500 and turns
fail as ``persistence_error``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import AgentSession
from tests.api.helpers import new_session

pytestmark = pytest.mark.anyio

AGENT = {"system_prompt": "You are terse.", "tools": []}
TOOL = {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
NO_SCHEMA = {"name": "write", "description": "Write a file"}
SHOWN = {"working_directory": "/shown"}
SKILL = {"name": "lint", "description": "Lint the code", "path": "skills/lint/SKILL.md"}


async def stored(api: httpx.AsyncClient, **values: Any) -> str:
    """A new session (the scripted model ``cfg-bot``) whose row then holds ``values``."""
    script = [{"text": "hello"}] * 8
    body = {
        "context_window_tokens": 10_000,
        "max_output_tokens": 100,
        "provider": {"kind": "scripted", "script": script},
    }
    assert (await api.put("/v1/models/cfg-bot", json=body)).status_code in (200, 201)
    sid = await new_session(api, model_id="cfg-bot")
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:
        await db.execute(update(AgentSession).where(AgentSession.id == sid).values(values))
    return sid


async def turn(api: httpx.AsyncClient, sid: str, request_id: str = "r1") -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{sid}/turns?wait=true",
        json={"client_request_id": request_id, "input": [{"type": "text", "text": "go"}]},
    )


def refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 409, response.text
    problem = response.json()
    assert problem["code"] == "session_config_invalid"
    assert problem["field"] == field
    assert "start a new session" in problem["detail"]


@pytest.mark.parametrize(
    ("agent", "field"),
    [
        ({"tools": []}, "agent.system_prompt"),
        ({"system_prompt": 7, "tools": []}, "agent.system_prompt"),
        ({"system_prompt": " \n", "tools": []}, "agent.system_prompt"),  # stored before 2026-12-04
        ({"system_prompt": "x", "tools": None}, "agent.tools"),
        ({"system_prompt": "x", "tools": [{"name": 5}]}, "agent.tools[0]"),
        ({"system_prompt": "x", "tools": [TOOL, NO_SCHEMA]}, "agent.tools[1]"),
        (["You are terse."], "agent"),
    ],
)
async def test_an_agent_the_api_never_stores_is_named_everywhere_it_is_needed(
    api: httpx.AsyncClient, agent: Any, field: str
) -> None:
    sid = await stored(api, agent=agent)

    # Reads of the session itself are untouched (a row stored before agents chose their
    # sections and control tools shows the coding agent it is).
    shown = (await api.get(f"/v1/sessions/{sid}")).json()["agent"]
    if isinstance(agent, dict):
        assert shown["preset"] == "coding"
        shown = {k: v for k, v in shown.items() if k in agent}
    assert shown == agent
    assert (await api.get("/v1/sessions")).status_code == 200
    appended = await api.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    )
    assert appended.status_code == 201, appended.text
    # What builds a request from it says what is wrong.
    refused(await api.get(f"/v1/sessions/{sid}/context"), field)
    refused(await api.post(f"/v1/sessions/{sid}/prepare", json={}), field)
    refused(await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True}), field)
    refused(await api.get(f"/v1/sessions/{sid}/compactions/request"), field)
    started = await turn(api, sid)
    assert started.status_code == 202, started.text
    done = started.json()
    assert done["status"] == "failed"
    assert done["outcome"]["code"] == "session_config_invalid"
    assert field in done["outcome"]["message"]


async def test_a_count_the_api_never_stores_fails_the_turn_and_null_means_the_default(
    api: httpx.AsyncClient,
) -> None:
    sid = await stored(api, agent={**AGENT, "max_model_calls": "many"})
    done = (await turn(api, sid)).json()
    assert (done["status"], done["outcome"]["code"]) == ("failed", "session_config_invalid")
    assert "agent.max_model_calls" in done["outcome"]["message"]

    # Missing and null both mean the default (20); a fraction is cut, as it always was.
    for count in (None, 2.5):
        sid = await stored(api, agent={**AGENT, "max_model_calls": count})
        done = (await turn(api, sid)).json()
        assert done["outcome"] == {"final_text": "hello"}, done


@pytest.mark.parametrize(
    ("values", "field", "repair"),
    [
        ({"workspace": "/srv/repo"}, "workspace", {"workspace": None}),
        ({"workspace": {"provided": ["x"]}}, "workspace.provided", {"workspace": None}),
        (
            {"workspace": {"provided": {**SHOWN, "skills": [{"name": "lint"}]}}},
            "workspace.provided.skills[0]",
            {"workspace": {"provided": SHOWN}},
        ),
        ({"disabled_skills": {"lint": True}}, "disabled_skills", {"disabled_skills": []}),
        ({"sandbox": "on"}, "sandbox", {"sandbox": {"mode": "auto"}}),
    ],
)
async def test_what_patch_can_replace_is_repaired_by_a_patch(
    api: httpx.AsyncClient, values: dict[str, Any], field: str, repair: dict[str, Any]
) -> None:
    sid = await stored(api, **values)
    refused(await api.post(f"/v1/sessions/{sid}/prepare", json={}), field)

    patched = await api.patch(f"/v1/sessions/{sid}", json=repair)

    assert patched.status_code == 200, patched.text
    prepared = await api.post(f"/v1/sessions/{sid}/prepare", json={})
    assert prepared.status_code == 200, prepared.text
    assert (await turn(api, sid)).json()["outcome"] == {"final_text": "hello"}


@pytest.mark.parametrize(
    ("workspace", "field"),
    [
        ({"provided": {}}, "workspace.provided.working_directory"),
        ({"provided": {"working_directory": 5}}, "workspace.provided.working_directory"),
        # A string is iterable: it was shown as one layout entry per character.
        ({"provided": {**SHOWN, "layout": "src/"}}, "workspace.provided.layout"),
        ({"provided": {**SHOWN, "layout": ["src/", 3]}}, "workspace.provided.layout"),
        ({"provided": {**SHOWN, "agents_md": 5}}, "workspace.provided.agents_md"),
        ({"provided": {**SHOWN, "repository_root": ["/"]}}, "workspace.provided.repository_root"),
        ({"provided": {**SHOWN, "skills": {"lint": SKILL}}}, "workspace.provided.skills"),
        ({"provided": {**SHOWN, "skills": [SKILL, "lint"]}}, "workspace.provided.skills[1]"),
        (
            {"provided": {**SHOWN, "skills": [{**SKILL, "body": 5}]}},
            "workspace.provided.skills[0]",
        ),
        (
            {"provided": {**SHOWN, "skills": [{**SKILL, "version": 2}]}},
            "workspace.provided.skills[0]",
        ),
        ({"skills_root": "/srv/skills"}, "workspace.working_directory"),
        ({"working_directory": 5}, "workspace.working_directory"),
        ({"working_directory": "/srv", "skills_root": 5}, "workspace.skills_root"),
        ({"working_directory": "/srv", "spill_directory": ["/tmp"]}, "workspace.spill_directory"),
    ],
)
async def test_a_workspace_the_api_never_stores_is_named_and_starts_no_turn(
    api: httpx.AsyncClient, workspace: dict[str, Any], field: str
) -> None:
    """Before, each of these answered 500 to prepare and to a turn's start (or failed the turn
    as persistence_error, or blamed the caller's input with a 422)."""
    sid = await stored(api, workspace=workspace)

    assert (await api.get(f"/v1/sessions/{sid}")).json()["workspace"] == workspace
    refused(await api.post(f"/v1/sessions/{sid}/prepare", json={}), field)
    refused(await api.get(f"/v1/sessions/{sid}/context"), field)
    refused(await turn(api, sid), field)
    # Nothing was started, so nothing holds the session: once repaired, a turn runs.
    assert (await api.get(f"/v1/sessions/{sid}/turns")).json()["turns"] == []
    assert (await api.patch(f"/v1/sessions/{sid}", json={"workspace": None})).status_code == 200
    assert (await turn(api, sid)).json()["outcome"] == {"final_text": "hello"}


async def test_a_stored_provided_workspace_of_the_api_s_shape_is_used_as_stored(
    api: httpx.AsyncClient,
) -> None:
    """The boundary of the check above: every optional part present, null or missing reads."""
    full = {
        **SHOWN,
        "repository_root": None,
        "layout": ["src/"],
        "agents_md": "Be brief.",
        "skills": [SKILL, {**SKILL, "name": "fmt", "body": None}],
    }
    for workspace in ({"provided": SHOWN}, {"provided": full}, {}):
        sid = await stored(api, workspace=workspace)
        prepared = await api.post(f"/v1/sessions/{sid}/prepare", json={})
        assert prepared.status_code == 200, prepared.text
        assert (await turn(api, sid)).json()["outcome"] == {"final_text": "hello"}
