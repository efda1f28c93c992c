"""A turn's start prepares the first model call in its own transaction when that reads no file
(``app/services/turns/first_call.py``); a failure there fails the turn, never the start."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.errors import InvalidInput
from app.main import create_app
from app.services.world_state import WorldStateSampler
from tests.api.helpers import new_session, run_turn, scripted_model, stored
from tests.conftest import make_settings
from tests.multiprocess.servers import read_events, serve_in_process

pytestmark = pytest.mark.anyio

PROVIDED: dict[str, Any] = {
    "working_directory": "/shown/app",
    "repository_root": "/shown/app",
    "layout": ["README.md"],
    "agents_md": "Rule one.",
    "skills": [],
}


@asynccontextmanager
async def live(database_url: str, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a real server (the event stream needs one: httpx's ASGI transport buffers)."""
    app = create_app(make_settings(database_url, events_poll_seconds=0.1, **settings))
    async with (
        serve_in_process(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def start(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    body = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": "go"}]}
    response = await api.post(f"/v1/sessions/{sid}/turns", json=body)
    assert response.status_code == 202, response.text
    return dict(response.json())


@pytest.mark.parametrize("workspace", [None, {"provided": PROVIDED}])
async def test_a_start_that_reads_no_file_is_already_running_the_model(
    database_url: str, workspace: dict[str, Any] | None
) -> None:
    async with live(database_url) as api:
        model_id = await scripted_model(api, [{"text": "done"}])
        sid = await new_session(api, model_id=model_id, workspace=workspace)
        turn = await start(api, sid)
        assert (turn["phase"], turn["model_calls"]) == ("running_model", 1)
        events = await read_events(api, f"/v1/sessions/{sid}/events")
    assert [e.event for e in events][:2] == ["turn_started", "phase_changed"]
    assert events[1].data["payload"] == {"phase": "running_model"}
    assert events[-1].data["payload"]["outcome"] == {"final_text": "done"}


async def test_a_filesystem_workspace_is_read_by_the_first_step(
    database_url: str, tmp_path: Path
) -> None:
    root = (tmp_path / "allowed").resolve()
    (root / "repo").mkdir(parents=True)
    async with live(database_url, workspace_roots=[str(root)]) as api:
        model_id = await scripted_model(api, [{"text": "done"}])
        workspace = {"working_directory": str(root / "repo")}
        sid = await new_session(api, model_id=model_id, workspace=workspace)
        turn = await start(api, sid)
        assert (turn["phase"], turn["model_calls"]) == ("starting", 0)
        events = await read_events(api, f"/v1/sessions/{sid}/events")
    assert [e.event for e in events][:2] == ["turn_started", "phase_changed"]
    assert events[-1].data["payload"]["outcome"] == {"final_text": "done"}


async def test_a_failing_first_call_fails_the_turn_and_the_start_writes_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(*_args: Any, **_kwargs: Any) -> list[Any]:
        raise InvalidInput("user_project_context_error", "the project context cannot be shown")

    monkeypatch.setattr(WorldStateSampler, "write", refuse)
    async with live(database_url) as api:
        model_id = await scripted_model(api, [{"text": "never sent"}])
        sid = await new_session(api, model_id=model_id, workspace={"provided": PROVIDED})
        turn = await run_turn(api, sid)
        assert turn["status"] == "failed"
        assert turn["outcome"]["code"] == "user_project_context_error"
        assert turn["model_calls"] == 0
        # The rolled-back first attempt left nothing behind: one user message, one turn started.
        messages = await stored(api, sid)
        events = await read_events(api, f"/v1/sessions/{sid}/events")
    assert [(m["role"], m["kind"]) for m in messages] == [("user", "normal")]
    assert [e.event for e in events].count("turn_started") == 1
