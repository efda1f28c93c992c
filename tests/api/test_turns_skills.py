"""Selected skills become ``skill_instruction`` messages before the user message (spec §6)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.api.helpers import new_session, scripted_model
from tests.api.test_turns import agent, history

pytestmark = pytest.mark.anyio

PATH = "/w/skills/deploy/SKILL.md"


def workspace(
    body: str | None = "---\nname: deploy\ndescription: Ship it\n---\nRun make deploy.",
) -> dict[str, Any]:
    skill: dict[str, Any] = {"name": "deploy", "description": "Ship it", "path": PATH}
    if body is not None:
        skill["body"] = body
    return {"provided": {"working_directory": "/w", "layout": [], "skills": [skill]}}


async def skilled_session(api: httpx.AsyncClient, **overrides: Any) -> str:
    model_id = await scripted_model(api, [{"text": "deployed"}])
    body: dict[str, Any] = {"model_id": model_id, "agent": agent(), "workspace": workspace()}
    body.update(overrides)
    return await new_session(api, **body)


async def start(api: httpx.AsyncClient, sid: str, *items: dict[str, Any]) -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{sid}/turns",
        params={"wait": "true"},
        json={"client_request_id": uuid.uuid4().hex, "input": list(items)},
    )


TEXT = {"type": "text", "text": "deploy please"}
SKILL = {"type": "skill", "name": "deploy"}


async def test_skill_snapshot_precedes_the_user_message_and_duplicates_drop(
    api: httpx.AsyncClient,
) -> None:
    sid = await skilled_session(api)
    response = await start(api, sid, SKILL, TEXT, SKILL)
    assert response.status_code == 202, response.text
    messages = await history(api, sid)
    assert [(m["role"], m["kind"]) for m in messages][:2] == [
        ("user", "skill_instruction"),
        ("user", "normal"),
    ]
    assert messages[0]["content"][0]["text"] == (
        f"<skill>\n<name>deploy</name>\n<path>{PATH}</path>\nRun make deploy.\n</skill>"
    )
    assert messages[1]["content"] == [{"type": "text", "text": "deploy please"}]


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        ({}, "unknown"),
        ({"disabled_skills": ["deploy"]}, "deploy"),
        ({"workspace": workspace(body=None)}, "deploy"),
        ({"workspace": None}, "deploy"),
    ],
)
async def test_unavailable_skill_refuses_the_turn_and_stores_nothing(
    api: httpx.AsyncClient, overrides: dict[str, Any], name: str
) -> None:
    sid = await skilled_session(api, **overrides)
    response = await start(api, sid, {"type": "skill", "name": name}, TEXT)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "skill_unavailable"
    assert await history(api, sid) == []
    # Nothing half-done: the session accepts a turn right away.
    assert (await start(api, sid, TEXT)).status_code == 202


async def test_skill_body_at_the_cap_is_refused(api: httpx.AsyncClient) -> None:
    big = "x" * (8000 * 4)
    sid = await skilled_session(api, workspace=workspace(body=big))
    response = await start(api, sid, SKILL, TEXT)
    assert response.status_code == 422
    assert response.json()["code"] == "skill_too_large"
    assert await history(api, sid) == []
