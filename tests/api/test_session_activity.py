"""What a session has been doing: its turns (listed), what they cost (usage on the session) and
the update an append outside a turn announces (``messages_appended``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from app.main import create_app
from tests.api.helpers import append, new_session, prepare_session, run_turn, scripted_model, user
from tests.conftest import make_settings
from tests.multiprocess.servers import read_events, serve_in_process

pytestmark = pytest.mark.anyio

USAGE = {"input_tokens": 120, "output_tokens": 7}


async def test_turns_are_listed_newest_first_across_pages(api: httpx.AsyncClient) -> None:
    model_id = await scripted_model(
        api, [{"text": f"answer {n}", "usage": USAGE} for n in range(3)]
    )
    sid = await new_session(api, model_id=model_id)
    started = [(await run_turn(api, sid, f"request {n}"))["turn_id"] for n in range(3)]

    first = await api.get(f"/v1/sessions/{sid}/turns", params={"limit": 2})
    assert first.status_code == 200, first.text
    page = first.json()
    assert [t["turn_id"] for t in page["turns"]] == started[::-1][:2]
    assert all(t["status"] == "completed" for t in page["turns"])
    rest = (
        await api.get(
            f"/v1/sessions/{sid}/turns", params={"limit": 2, "cursor": page["next_cursor"]}
        )
    ).json()
    assert [t["turn_id"] for t in rest["turns"]] == [started[0]]
    assert rest["next_cursor"] is None
    # Exactly the page size: no further page.
    whole = (await api.get(f"/v1/sessions/{sid}/turns", params={"limit": 3})).json()
    assert len(whole["turns"]) == 3
    assert whole["next_cursor"] is None


async def test_listing_turns_refuses_an_unknown_session_and_a_forged_cursor(
    api: httpx.AsyncClient,
) -> None:
    missing = await api.get("/v1/sessions/ses-nope/turns")
    assert missing.status_code == 404
    assert missing.json()["code"] == "session_not_found"
    sid = await new_session(api)
    forged = await api.get(f"/v1/sessions/{sid}/turns", params={"cursor": "not-a-cursor"})
    assert forged.status_code == 422
    assert forged.json()["code"] == "invalid_cursor"
    empty = (await api.get(f"/v1/sessions/{sid}/turns")).json()
    assert empty == {"turns": [], "next_cursor": None}


async def test_a_sessions_usage_adds_up_its_turns(api: httpx.AsyncClient) -> None:
    model_id = await scripted_model(api, [{"text": "a", "usage": USAGE}, {"text": "b"}])
    sid = await new_session(api, model_id=model_id)
    other = await new_session(api, model_id=model_id)
    created = (await api.get(f"/v1/sessions/{sid}")).json()
    assert created["usage"] == {
        "turns": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_tokens": 0,
        "cache_creation_tokens": 0,
        "reasoning_tokens": 0,
        "proxied_calls": 0,
    }
    await run_turn(api, sid, "one")
    await run_turn(api, sid, "two")  # no usage reported
    session = (await api.get(f"/v1/sessions/{sid}")).json()
    assert session["usage"] == {**created["usage"], "turns": 2, **USAGE}
    listed = {s["id"]: s["usage"] for s in (await api.get("/v1/sessions")).json()["sessions"]}
    assert listed[sid] == session["usage"]
    assert listed[other]["turns"] == 0


@pytest.fixture
async def live(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(database_url, events_poll_seconds=0.1)
    async with (
        serve_in_process(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def test_an_append_and_a_session_prepare_announce_the_stored_sequences(
    live: httpx.AsyncClient,
) -> None:
    sid = await new_session(live)
    await append(live, sid, user("first"), user("second"))
    refused = await append(
        live, sid, {"role": "system", "content": [{"type": "text", "text": "x"}]}
    )
    assert refused.status_code == 422  # a refused append stores nothing and announces nothing
    prepared = await prepare_session(live, sid)  # stores the World State sections it samples
    assert prepared.status_code == 200, prepared.text
    samples = len(prepared.json()["world_state_message_ids"])
    assert samples > 0
    with anyio.fail_after(10):
        events = await read_events(live, f"/v1/sessions/{sid}/events", limit=2)
    assert [(e.id, e.event) for e in events] == [(1, "messages_appended"), (2, "messages_appended")]
    assert events[0].data["payload"] == {"first_sequence": 1, "last_sequence": 2, "count": 2}
    assert events[1].data["payload"] == {
        "first_sequence": 3,
        "last_sequence": 2 + samples,
        "count": samples,
    }
    assert events[0].data["turn_id"] is None


async def test_the_active_history_counts_what_follows_the_latest_checkpoint(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    fresh = (await api.get(f"/v1/sessions/{sid}")).json()
    assert fresh["active_history_tokens"] == 0
    await append(api, sid, user("x" * 1000), user("y" * 1000))  # 1027 bytes each
    grown = (await api.get(f"/v1/sessions/{sid}")).json()
    assert grown["active_history_tokens"] == -(-2 * 1027 // 4)
    compacted = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert compacted.status_code == 201, compacted.text
    await append(api, sid, user("z" * 100))  # 127 bytes: all that follows the checkpoint
    after = (await api.get(f"/v1/sessions/{sid}")).json()
    assert after["active_history_tokens"] == -(-127 // 4)
    listed = {s["id"]: s for s in (await api.get("/v1/sessions")).json()["sessions"]}
    assert listed[sid]["active_history_tokens"] == after["active_history_tokens"]


async def test_the_active_history_leaves_out_what_was_taken_back(
    api: httpx.AsyncClient,
) -> None:
    async def history_tokens() -> int:
        shown = (await api.get(f"/v1/sessions/{sid}")).json()["active_history_tokens"]
        listed = {s["id"]: s for s in (await api.get("/v1/sessions")).json()["sessions"]}
        assert listed[sid]["active_history_tokens"] == shown
        return int(shown)

    sid = await new_session(api)
    await append(api, sid, user("x" * 1000), user("y" * 1000))  # 1027 bytes each
    assert await history_tokens() == -(-2 * 1027 // 4)
    popped = await api.post(f"/v1/sessions/{sid}/items/pop", json={"format": "openai_responses"})
    assert popped.status_code == 200, popped.text
    assert popped.json()["item"]["content"] == "y" * 1000
    # The next request holds only the first message: so does the figure.
    assert await history_tokens() == -(-1027 // 4)
    await append(api, sid, user("z" * 100))  # 127 bytes
    assert await history_tokens() == -(-(1027 + 127) // 4)
    cleared = await api.post(f"/v1/sessions/{sid}/epochs")
    assert cleared.status_code in (200, 201), cleared.text
    assert await history_tokens() == 0
    await append(api, sid, user("w" * 100))
    assert await history_tokens() == -(-127 // 4)
