"""A turn waiting for tool results ends at its deadline, on both engines: the
deadline and the time left are on the turn; past it the turn is ``failed`` with
``tool_results_timeout``, every call still without a result gets the fixed not-executed result,
nothing is taken after the deadline, and the session is free for the next turn.

Here nothing sweeps (the reaper runs once an hour) and no test waits for time to pass: the
deadline is passed by moving the clock the deadline rules read (``waiting.utc_now``), and whoever
touches the turn first after it ends it. ``tests/ops/test_tool_results_deadline_process.py``
has real time and the sweeper, in a real server process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.services.turns.calls import NOT_EXECUTED_TEXT
from tests.api.helpers import new_session, run_turn, scripted_model
from tests.api.test_turns import agent, call, history, ok, post_results, results_of
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

DEFAULT_TIMEOUT = 900  # the service's setting in these tests; a session may set its own


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        database_url,
        tool_results_timeout_seconds=DEFAULT_TIMEOUT,
        turn_reaper_interval_seconds=3600,
    )
    async for client in client_for(settings):
        yield client


def parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def waiting_turn(
    api: httpx.AsyncClient, calls: int = 1, **agent_overrides: Any
) -> tuple[str, dict[str, Any]]:
    """A session whose turn waits for ``calls`` read results; the model then says "done"."""
    reads = [call("read", path=f"f{i}.py") for i in range(calls)]
    model_id = await scripted_model(api, [{"tool_calls": reads}, {"text": "done"}, {"text": "ok"}])
    sid = await new_session(api, model_id=model_id, agent=agent(**agent_overrides))
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["phase"]) == ("running", "waiting_tool_results"), turn
    return sid, turn


def clock_past(monkeypatch: pytest.MonkeyPatch, deadline: str) -> None:
    """From now on the deadline rules' clock reads just past ``deadline``."""
    moved = parse(deadline) + timedelta(milliseconds=1)
    monkeypatch.setattr("app.services.turns.waiting.utc_now", lambda: moved)


async def get_turn(api: httpx.AsyncClient, sid: str, turn_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/sessions/{sid}/turns/{turn_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def timed_out(turn: dict[str, Any]) -> None:
    assert (turn["status"], turn["phase"]) == ("failed", "terminal"), turn
    assert turn["outcome"]["code"] == "tool_results_timeout"
    assert (turn["tool_results_deadline"], turn["tool_results_remaining_seconds"]) == (None, None)
    assert turn["pending_tool_calls"] == []


@pytest.mark.parametrize(("own", "seconds"), [(600, 600), (None, DEFAULT_TIMEOUT)])
async def test_the_deadline_and_the_time_left_are_on_the_waiting_turn(
    api: httpx.AsyncClient, own: int | None, seconds: int
) -> None:
    """The session's own timeout, else the service's setting."""
    before = datetime.now(UTC)
    sid, turn = await waiting_turn(api, tool_results_timeout_seconds=own)
    after = datetime.now(UTC)
    deadline = parse(turn["tool_results_deadline"])
    assert before + timedelta(seconds=seconds) <= deadline <= after + timedelta(seconds=seconds)
    assert 0 < turn["tool_results_remaining_seconds"] <= seconds
    read = await get_turn(api, sid, turn["turn_id"])
    assert read["tool_results_deadline"] == turn["tool_results_deadline"]
    assert read["tool_results_remaining_seconds"] <= turn["tool_results_remaining_seconds"]

    (pending,) = turn["pending_tool_calls"]
    done = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert done.json()["status"] == "completed", done.text
    # Not waiting any more: no deadline to show.
    assert (
        done.json()["tool_results_deadline"],
        done.json()["tool_results_remaining_seconds"],
    ) == (
        None,
        None,
    )


async def test_past_the_deadline_a_read_finds_it_ended_and_the_session_free(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api, calls=2)
    (first, second) = turn["pending_tool_calls"]
    # One result in time: it is kept; the other call never gets one.
    partial = await post_results(api, sid, turn["turn_id"], ok(first["tool_call_id"]), wait=False)
    assert partial.json()["missing_tool_call_ids"] == [second["tool_call_id"]]
    clock_past(monkeypatch, turn["tool_results_deadline"])

    ended = await get_turn(api, sid, turn["turn_id"])
    timed_out(ended)
    assert second["tool_call_id"] in ended["outcome"]["message"]
    results = results_of(await history(api, sid))
    assert [(r["id"], r["state"]) for r in results] == [
        (first["tool_call_id"], "success"),
        (second["tool_call_id"], "interrupted"),
    ]
    assert results[1]["output"][0]["text"] == NOT_EXECUTED_TEXT

    following = await run_turn(api, sid, "carry on")
    assert (following["status"], following["outcome"]) == ("completed", {"final_text": "done"})


async def test_a_result_posted_after_the_deadline_is_refused(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api)
    (pending,) = turn["pending_tool_calls"]
    clock_past(monkeypatch, turn["tool_results_deadline"])

    late = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert late.status_code == 409, late.text
    assert (late.json()["code"], late.json()["turn_status"]) == ("turn_not_waiting", "failed")
    timed_out(await get_turn(api, sid, turn["turn_id"]))
    (result,) = results_of(await history(api, sid))
    assert (result["state"], result["output"][0]["text"]) == ("interrupted", NOT_EXECUTED_TEXT)


async def test_a_cancel_after_the_deadline_finds_it_ended(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api)
    clock_past(monkeypatch, turn["tool_results_deadline"])
    response = await api.post(f"/v1/sessions/{sid}/turns/{turn['turn_id']}/cancel")
    assert (response.status_code, response.json()["code"]) == (409, "turn_not_active")
    assert response.json()["turn_status"] == "failed"
    timed_out(await get_turn(api, sid, turn["turn_id"]))


async def test_a_new_turn_after_the_deadline_starts_at_once(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api)
    clock_past(monkeypatch, turn["tool_results_deadline"])
    # Nothing read the old turn: the start itself ends it instead of answering busy.
    following = await run_turn(api, sid, "next")
    assert following["status"] == "completed", following
    timed_out(await get_turn(api, sid, turn["turn_id"]))


async def test_a_millisecond_before_the_deadline_nothing_ends_it(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api)
    before = parse(turn["tool_results_deadline"]) - timedelta(milliseconds=1)
    monkeypatch.setattr("app.services.turns.waiting.utc_now", lambda: before)
    body = {"client_request_id": "another", "input": [{"type": "text", "text": "x"}]}
    busy = await api.post(f"/v1/sessions/{sid}/turns", json=body)
    assert (busy.status_code, busy.json()["code"]) == (409, "busy")
    read = await get_turn(api, sid, turn["turn_id"])
    assert (read["status"], read["tool_results_remaining_seconds"]) == ("running", 0.001)


async def test_on_the_deadline_it_ends(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, turn = await waiting_turn(api)
    on_it = parse(turn["tool_results_deadline"])
    monkeypatch.setattr("app.services.turns.waiting.utc_now", lambda: on_it)
    timed_out(await get_turn(api, sid, turn["turn_id"]))


@pytest.mark.parametrize(
    ("seconds", "taken"), [(0.5, False), (1, True), (604_800, True), (604_801, False)]
)
async def test_a_session_timeout_is_taken_within_its_bounds(
    api: httpx.AsyncClient, seconds: float, taken: bool
) -> None:
    response = await api.post(
        "/v1/sessions",
        json={"model_id": "local", "agent": agent(tool_results_timeout_seconds=seconds)},
    )
    if taken:
        assert response.status_code == 201, response.text
        assert response.json()["agent"]["tool_results_timeout_seconds"] == seconds
    else:
        assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
