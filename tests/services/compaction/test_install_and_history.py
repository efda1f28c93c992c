"""Install failure → reload_required → rebuild; a failed checkpoint write on PostgreSQL; the
``conversation_history`` tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from app.core.errors import Conflict
from app.services.compaction import conversation_history_result
from app.services.conversation import ActiveConversation
from app.storage.database import unit_of_work
from tests.api.helpers import append, new_session, text, user
from tests.conftest import admin_conninfo, make_settings
from tests.services.compaction.conftest import FAST, Harness, harness_for

pytestmark = pytest.mark.anyio


async def failing_hook(session_id: str, active: ActiveConversation) -> None:
    raise RuntimeError("live view unavailable")


async def two_messages(h: Harness) -> str:
    sid = await new_session(h.api)
    await append(h.api, sid, user("Hello there."), {"role": "assistant", "content": text("Hi.")})
    return sid


async def test_failure_between_commit_and_install_requires_a_reload(harness: Harness) -> None:
    h = harness
    sid = await two_messages(h)
    h.container.compactor.install_hooks.append(failing_hook)

    response = await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})

    assert (response.status_code, response.json()["code"]) == (409, "reload_required")
    assert "must be reloaded" in response.json()["detail"]
    compaction_id = response.json()["compaction_id"]
    assert (await h.api.get(f"/v1/sessions/{sid}")).json()["reload_required"] is True
    # The checkpoint is durable; the rebuild still fails while the live view is broken.
    still_broken = await h.api.post(f"/v1/sessions/{sid}/reload")
    assert (still_broken.status_code, still_broken.json()["code"]) == (503, "reload_failed")
    h.container.compactor.install_hooks.clear()

    rebuilt = await h.api.post(f"/v1/sessions/{sid}/reload")

    assert rebuilt.status_code == 200, rebuilt.text
    assert rebuilt.json() == {
        "session_id": sid,
        "reload_required": False,
        "compaction_id": compaction_id,
    }
    assert (await h.api.get(f"/v1/sessions/{sid}")).json()["reload_required"] is False
    replay = (await h.api.get(f"/v1/sessions/{sid}/replay")).json()
    assert replay["compaction_id"] == compaction_id


@pytest.fixture
async def postgres(postgres_url: str) -> AsyncIterator[Harness]:
    async for h in harness_for(make_settings(postgres_url, **FAST)):
        yield h


@pytest.mark.postgres
async def test_a_failed_checkpoint_write_leaves_the_conversation_intact(
    postgres: Harness, postgres_url: str
) -> None:
    """A real PostgreSQL transaction fails at the checkpoint INSERT (a trigger raises for this
    session only): everything written in it rolls back, the old conversation is unchanged."""
    h = postgres
    sid = await two_messages(h)
    first = (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    await append(h.api, sid, user("One more thing."))
    before = (await h.api.get(f"/v1/sessions/{sid}/context")).content
    events_before = await h.api.get(f"/v1/sessions/{sid}/compactions")
    name = f"fail_{sid.replace('-', '_')}"
    with psycopg.connect(admin_conninfo(postgres_url), autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.session_id = '{sid}' THEN RAISE EXCEPTION 'disk full'; END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        conn.execute(
            f"CREATE TRIGGER {name} BEFORE INSERT ON conversation_compactions "
            f"FOR EACH ROW EXECUTE FUNCTION {name}()"
        )
    try:
        response = await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    finally:
        with psycopg.connect(admin_conninfo(postgres_url), autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER {name} ON conversation_compactions")
            conn.execute(f"DROP FUNCTION {name}()")

    assert (response.status_code, response.json()["code"]) == (503, "persistence_error")
    assert (await h.api.get(f"/v1/sessions/{sid}/context")).content == before
    after = (await h.api.get(f"/v1/sessions/{sid}/compactions")).json()
    assert after == events_before.json()
    assert [c["compaction_id"] for c in after["compactions"]] == [first["compaction_id"]]


async def test_conversation_history_tool(harness: Harness) -> None:
    h = harness
    sid = await two_messages(h)
    db = h.container.db
    async with unit_of_work(db, read_only=True) as session:
        result, state = await conversation_history_result(session, sid, "{}")
    assert state == "error"
    assert "no conversation compaction" in result

    checkpoint = (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    await append(h.api, sid, user("Past the boundary."))
    async with unit_of_work(db, read_only=True) as session:
        first, state = await conversation_history_result(session, sid, '{"limit": 1}')
        page = json.loads(first)
        assert state == "success"
        assert page["compactionId"] == checkpoint["compaction_id"]
        assert [m["sequence"] for m in page["messages"]] == [1]
        assert (page["hasMore"], page["nextAfterSequence"]) == (True, 1)
        rest, _ = await conversation_history_result(
            session, sid, json.dumps({"afterSequence": 1, "limit": 50})
        )
        assert [m["sequence"] for m in json.loads(rest)["messages"]] == [2]  # never 3
        for bad in ('{"limit": 0}', '{"unknown": 1}', "not json", '{"compactionId": "cmp-x"}'):
            text_, state = await conversation_history_result(session, sid, bad)
            assert state == "error"
            assert text_


async def test_rebuild_refuses_while_a_turn_runs(harness: Harness) -> None:
    from app.storage.repositories import TurnRepository

    h = harness
    sid = await two_messages(h)
    async with unit_of_work(h.container.db) as db:
        await TurnRepository(db).create_running(
            session_id=sid, turn_id="t1", client_request_id="t1", input=[], phase="model"
        )
    with pytest.raises(Conflict):
        await h.container.compactor.rebuild(sid)
