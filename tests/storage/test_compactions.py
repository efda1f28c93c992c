from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Compaction
from app.storage.repositories import CompactionRepository, SessionRepository, TurnRepository
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio

SUMMARY = '<conversation_summary format_version="1">\n' + "## 1. Primary Request\nx\n" * 40


def checkpoint(sid: str, compaction_id: str, **overrides: Any) -> Compaction:
    values: dict[str, Any] = {
        "session_id": sid,
        "compaction_id": compaction_id,
        "kind": "manual",
        "through_message_sequence": 10,
        "replaced_through_message_sequence": 10,
        "source_message_count": 10,
        "last_user_message_id": "msg-1",
        "last_user_message_sequence": 1,
        "summary": SUMMARY,
        "summary_format_version": 1,
        "runtime_state": {
            "schema_version": 1,
            "edited_paths": [],
            "extensions": {},
            "warnings": [],
        },
        "runtime_reminder": '<system_reminder format_version="1">\nNone\n</system_reminder>',
        "model": "local/test",
        "trigger_turn_id": None,
        "parent_compaction_id": None,
    }
    values.update(overrides)
    return Compaction(**values)


async def add(factory: SessionFactory, row: Compaction) -> Compaction:
    async with unit_of_work(factory) as db:
        return await CompactionRepository(db).add(row)


async def session_with_turn(factory: SessionFactory, make_session: MakeSession) -> str:
    """A session with a turn ``t1`` (a trigger turn must be a turn of the session)."""
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await TurnRepository(db).create_running(
            session_id=sid, turn_id="t1", client_request_id="r1", input=[], phase="starting"
        )
    return sid


IMPOSSIBLE = {
    "unknown kind": {"kind": "magic"},
    "summary format 2": {"summary_format_version": 2},
    "negative fact boundary": {
        "through_message_sequence": -1,
        "last_user_message_sequence": None,
        "last_user_message_id": None,
    },
    "install before facts": {"replaced_through_message_sequence": 9},
    "non-rewind hides a tail": {"replaced_through_message_sequence": 12},
    "threshold without trigger turn": {"kind": "threshold"},
    "overflow without trigger turn": {"kind": "overflow"},
    "manual with trigger turn": {"trigger_turn_id": "t1"},
    "manual with trigger prepare": {"trigger_prepare_id": "prepare-1"},
    "threshold naming no turn": {"kind": "threshold", "trigger_turn_id": "t-missing"},
    "threshold naming a turn and a prepare": {
        "kind": "threshold",
        "trigger_turn_id": "t1",
        "trigger_prepare_id": "prepare-1",
    },
    "rewind without parent": {"kind": "rewind"},
    "manual with parent": {"parent_compaction_id": "c1"},
    "short summary": {"summary": "x" * 499},
    "last user id without sequence": {"last_user_message_sequence": None},
    "last user after facts": {"last_user_message_sequence": 11},
}


@pytest.mark.parametrize("overrides", IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
async def test_check_constraints_refuse_impossible_rows(
    factory: SessionFactory, make_session: MakeSession, overrides: dict[str, Any]
) -> None:
    sid = await session_with_turn(factory, make_session)
    await add(factory, checkpoint(sid, "c1"))
    with pytest.raises(IntegrityError):
        await add(factory, checkpoint(sid, "c2", **overrides))
    async with unit_of_work(factory, read_only=True) as db:
        assert [c.compaction_id for c in await CompactionRepository(db).list_for_session(sid)] == [
            "c1"
        ]


async def test_possible_rows_get_sequences_and_are_found(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await session_with_turn(factory, make_session)
    manual = await add(factory, checkpoint(sid, "c1", summary="x" * 500))
    threshold = await add(
        factory,
        checkpoint(
            sid,
            "c2",
            kind="threshold",
            trigger_turn_id="t1",
            through_message_sequence=20,
            replaced_through_message_sequence=20,
            trigger={"estimated_input_tokens": 9},
        ),
    )
    rewind = await add(
        factory,
        checkpoint(
            sid,
            "c3",
            kind="rewind",
            parent_compaction_id="c1",
            replaced_through_message_sequence=30,
        ),
    )
    assert [manual.sequence, threshold.sequence, rewind.sequence] == [1, 2, 3]
    async with unit_of_work(factory, read_only=True) as db:
        repo = CompactionRepository(db)
        latest = await repo.latest(sid)
        assert latest is not None
        assert latest.compaction_id == "c3"
        assert latest.created_at.tzinfo is not None
        through = await repo.latest_installed_through(sid, 25)
        assert through is not None
        assert through.compaction_id == "c2"
        assert await repo.latest_installed_through(sid, 5) is None
        older = await repo.list_for_session(sid, before_sequence=3, limit=1)
        assert [c.compaction_id for c in older] == ["c2"]
        got = await repo.get(sid, "c2")
        assert got is not None
        assert got.trigger == {"estimated_input_tokens": 9}


async def test_rewind_parent_must_exist(factory: SessionFactory, make_session: MakeSession) -> None:
    sid = await make_session()
    with pytest.raises(IntegrityError):
        await add(factory, checkpoint(sid, "c9", kind="rewind", parent_compaction_id="nope"))


async def test_a_threshold_checkpoint_may_name_a_session_prepare_instead(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    row = checkpoint(sid, "c1", kind="threshold", trigger_prepare_id="prepare-" + "0" * 32)
    stored = await add(factory, row)
    assert (stored.trigger_turn_id, stored.trigger_prepare_id) == (None, "prepare-" + "0" * 32)


async def test_the_summary_request_remembered_is_the_one_that_saw_more(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """Two summary requests read at once: whichever is recorded last, the session remembers the
    one that covered more messages (and keeps its ``updated_at``)."""
    sid = await make_session()
    async with unit_of_work(factory, read_only=True) as db:
        before = (await SessionRepository(db).require(sid)).updated_at
    for through, compaction_id in ((5, "c1"), (3, "c0"), (5, "c2")):
        async with unit_of_work(factory) as db:
            await CompactionRepository(db).record_summary_request(
                sid, through=through, compaction_id=compaction_id
            )
    async with unit_of_work(factory, read_only=True) as db:
        session = await SessionRepository(db).require(sid)
    assert (session.summary_request_through_sequence, session.summary_request_compaction_id) == (
        5,
        "c2",
    )
    assert session.updated_at == before
