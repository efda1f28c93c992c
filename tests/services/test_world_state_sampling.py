"""The World State sampler against a real database (both backends) and real directories:
transaction boundaries, idempotent retries, the capture time bound, concurrency, and logging."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.api.schemas.sessions import SessionCreate
from app.container import Container
from app.core.content import Item
from app.core.errors import ServiceError
from app.services.world_state import WorldStateSampler, _BaselineCache
from app.storage.database import unit_of_work
from app.storage.models.session import UNKNOWN_WORLD_STATE_VERSION
from app.storage.repositories import BaselineRepository, MessageRepository, SessionRepository
from app.storage.repositories.records import StoredMessage
from tests.conftest import make_settings, recorded_statements, touching

pytestmark = pytest.mark.anyio

SECTIONS = [
    "runtime/user-project-context",
    "project/AGENTS.md",
    "runtime/sandbox-policy",
]


class WriteFailed(Exception):
    """Stands for anything that fails the caller's transaction after the messages were written."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = (tmp_path / "allowed").resolve()
    path.mkdir()
    return path


@pytest.fixture
def repo(root: Path) -> Path:
    """A working directory below its repository root: the layout shown is the root's, so
    editing the working directory's AGENTS.md changes that section only."""
    (root / "project" / ".git").mkdir(parents=True)
    path = root / "project" / "pkg"
    path.mkdir()
    (path / "AGENTS.md").write_text("Be brief.")
    return path


@pytest.fixture
async def container(database_url: str, root: Path) -> AsyncIterator[Container]:
    built = Container.build(make_settings(database_url, workspace_roots=[str(root)]))
    try:
        yield built
    finally:
        await built.aclose()


async def new_session(container: Container, workspace: dict[str, Any] | None = None) -> str:
    spec: dict[str, Any] = {
        "model_id": "local",
        "agent": {"system_prompt": "x", "tools": [], "preset": "coding"},
        "workspace": workspace,
        "sandbox": {"mode": "auto", "available": True},
    }
    return (await container.sessions.create(SessionCreate.model_validate(spec), "default")).id


async def sample(
    container: Container,
    session_id: str,
    *,
    turn_id: str = "turn-1",
    conversation: Sequence[Item] | None = None,
    fail: bool = False,
    sampler: WorldStateSampler | None = None,
    locked: bool = False,
) -> list[Item]:
    """One sampling in its own unit of work, on the conversation as stored (or as given);
    ``locked``: on the session row loaded under its lock, as a turn step samples."""
    async with unit_of_work(container.db) as db:
        session = await SessionRepository(db).require(session_id, for_update=locked)
        if conversation is None:
            conversation = [m.to_item() for m in await MessageRepository(db).load(session_id)]
        written = await (sampler or container.world_state).sample(
            db, session, conversation, turn_id=turn_id, model_call_index=1, sample_index=1
        )
        if fail:
            raise WriteFailed
    return written


async def rows(container: Container, session_id: str) -> list[StoredMessage]:
    async with unit_of_work(container.db, read_only=True) as db:
        return await MessageRepository(db).load(session_id)


async def baselines(container: Container, session_id: str) -> dict[str, str | None]:
    async with unit_of_work(container.db, read_only=True) as db:
        return await BaselineRepository(db).get_all(session_id)


async def test_a_failed_transaction_leaves_nothing_and_the_next_sampling_sends_it_again(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    with pytest.raises(WriteFailed):
        await sample(container, sid, fail=True)
    assert await rows(container, sid) == []
    assert await baselines(container, sid) == {}

    written = await sample(container, sid)
    stored = await rows(container, sid)
    expected_ids = [f"world-state:turn-1:1:1:{s}" for s in SECTIONS]
    assert [r.message_id for r in stored] == expected_ids
    assert [i.origin for i in written] == [i.origin for i in (r.to_item() for r in stored)]
    assert [r.world_state_section for r in stored] == SECTIONS
    assert [r.turn_id for r in stored] == ["turn-1"] * 3
    assert set(await baselines(container, sid)) == set(SECTIONS)

    # A retry of the same sampling that did not see its own messages (a stale conversation)
    # writes no duplicate and consumes no sequence.
    assert await sample(container, sid, conversation=[]) == []
    assert [r.sequence for r in await rows(container, sid)] == [1, 2, 3]
    # And with the conversation as stored, the unchanged world sends nothing at all.
    assert await sample(container, sid, turn_id="turn-2") == []


async def test_removal_is_remembered_as_known_absent(container: Container, repo: Path) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    await sample(container, sid)
    (repo / "AGENTS.md").unlink()
    (removal,) = await sample(container, sid, turn_id="turn-2")
    assert removal.content[0] == {
        "type": "text",
        "text": "The previously provided AGENTS.md instructions no longer apply.",
    }
    assert (await baselines(container, sid))["project/AGENTS.md"] is None
    assert await sample(container, sid, turn_id="turn-3") == []


async def test_a_capture_over_its_time_bound_fails_and_writes_nothing(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    stalled = WorldStateSampler(container.settings, capture_timeout_seconds=0)
    with pytest.raises(ServiceError) as caught:
        await sample(container, sid, sampler=stalled)
    assert caught.value.code == "user_project_context_error"
    assert await rows(container, sid) == []


async def test_concurrent_prepares_of_one_session_send_each_section_once(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    calls = (container.session_prepare.prepare_call(sid) for _ in range(4))
    results = await asyncio.gather(*calls)
    assert sorted(len(r.world_state_message_ids) for r in results) == [0, 0, 0, 3]
    assert [r.world_state_section for r in await rows(container, sid)] == SECTIONS


async def test_skill_warnings_and_catalog_drops_are_logged_without_content(
    container: Container, repo: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skills = root / "skills"
    skills.mkdir()
    (skills / "Bad_Name").mkdir()
    description = "secret-description " + "d" * 1000
    for i in range(12):  # twelve ~1 KiB lines cannot all fit in 8000 characters
        (skills / f"skill-{i:02d}").mkdir()
        (skills / f"skill-{i:02d}" / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: {description}\n---\nbody"
        )
    sid = await new_session(container, {"working_directory": str(repo), "skills_root": str(skills)})
    with caplog.at_level(logging.INFO, logger="ctxsvc.world_state"):
        written = await sample(container, sid)
    catalog = written[2].content[0]
    assert catalog["type"] == "text"
    assert len(catalog["text"]) <= 8000
    names = [f"skill-{i:02d}" for i in range(12)]
    kept = [n for n in names if f"- {n}: " in catalog["text"]]
    records = [r for r in caplog.records if r.name == "ctxsvc.world_state"]
    assert all(r.levelno == logging.INFO for r in records)
    dropped = [r.__dict__["skill"] for r in records if "omitted" in r.getMessage()]
    # Whole lines are dropped from the end, each one logged by name.
    assert dropped
    assert kept + dropped == names
    assert any("Bad_Name" in r.__dict__.get("reason", "") for r in records)
    assert not any("secret-description" in str(r.__dict__) for r in records)


async def sample_locked(
    container: Container,
    session_id: str,
    *,
    turn_id: str,
    sampler: WorldStateSampler | None = None,
    fail: bool = False,
) -> list[Item]:
    """One sampling as a turn step does it: on the session row loaded under its lock."""
    return await sample(
        container, session_id, turn_id=turn_id, sampler=sampler, fail=fail, locked=True
    )


async def test_an_unchanged_version_reuses_the_cached_baselines(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    assert len(await sample_locked(container, sid, turn_id="turn-1")) == 3
    with recorded_statements(container.engine) as statements:
        assert await sample_locked(container, sid, turn_id="turn-2") == []
    assert statements  # the step itself ran
    assert touching(statements, "world_state_baselines") == []


async def test_baselines_changed_by_another_replica_are_read_again(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    await sample_locked(container, sid, turn_id="turn-1")
    # Another replica (a sampler with a cache of its own) sends the changed AGENTS.md.
    (repo / "AGENTS.md").write_text("Be thorough.")
    other = WorldStateSampler(container.settings)
    assert len(await sample_locked(container, sid, turn_id="turn-2", sampler=other)) == 1
    with recorded_statements(container.engine) as statements:
        # Had this sampler trusted its cache, it would send the new AGENTS.md a second time.
        assert await sample_locked(container, sid, turn_id="turn-3") == []
    assert len(touching(statements, "world_state_baselines")) == 1


async def test_a_rolled_back_sample_is_sent_again(container: Container, repo: Path) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    await sample_locked(container, sid, turn_id="turn-1")
    (repo / "AGENTS.md").write_text("Be thorough.")
    with pytest.raises(WriteFailed):
        await sample_locked(container, sid, turn_id="turn-2", fail=True)
    # The rolled-back baselines were cached under a token that never became visible.
    (again,) = await sample_locked(container, sid, turn_id="turn-3")
    assert "Be thorough." in str(again.content)
    assert await sample_locked(container, sid, turn_id="turn-4") == []


async def test_a_row_not_loaded_under_the_lock_reads_the_stored_baselines(
    container: Container, repo: Path
) -> None:
    sid = await new_session(container, {"working_directory": str(repo)})
    await sample_locked(container, sid, turn_id="turn-1")
    with recorded_statements(container.engine) as statements:
        assert await sample(container, sid, turn_id="turn-2") == []
    assert len(touching(statements, "world_state_baselines")) == 1


def test_the_baseline_cache_is_bounded_by_bytes_and_hands_out_copies() -> None:
    one = 64 + len("a") + len("1")  # a section's bookkeeping, its id and its body
    cache = _BaselineCache(max_bytes=2 * one)  # two sessions of one short section
    cache.put("s1", "v1", {"a": "1"})
    cache.put("s2", "v1", {"a": "2"})
    assert cache.get("s1", "v1") == {"a": "1"}  # s1 is now the most recently used
    cache.put("s3", "v1", {"a": "3"})
    assert cache.get("s2", "v1") is None
    assert cache.get("s1", "v2") is None
    taken = cache.get("s1", "v1")
    assert taken is not None
    taken["a"] = "changed"
    assert cache.get("s1", "v1") == {"a": "1"}
    cache.put("s4", UNKNOWN_WORLD_STATE_VERSION, {})
    assert cache.get("s4", UNKNOWN_WORLD_STATE_VERSION) is None
    cache.put("s5", "v1", {"a": "x" * (2 * one)})  # larger than the whole bound: not kept
    assert cache.get("s5", "v1") is None
    assert cache.get("s1", "v1") == {"a": "1"}
